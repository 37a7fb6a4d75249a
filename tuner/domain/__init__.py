"""What a trial is: the config, the search space, the workload, the records that cross process
boundaries, and the layout of a study's folder. Imports neither torch nor pandas."""
