"""The in-cluster controller: watch-driven decision cycles, leader election, metrics and health."""
