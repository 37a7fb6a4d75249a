"""A runner that makes results up (:class:`~tuner.fake.runner.FakeRunner`), and the ``tuner``
command with it behind (``python -m tuner.fake``): for the tests, and for benchmarks' dry runs
(``--fake-runner``) on a machine without a GPU. Its numbers are never real; nothing of the
tuner reaches it unless a test or a benchmark puts it there (:func:`~tuner.fake.runner.install`).
"""

from tuner.fake.runner import FAKE_DELAY_ENV, FAKE_GPUS, FakeRunner, install

__all__ = ["FAKE_DELAY_ENV", "FAKE_GPUS", "FakeRunner", "install"]
