"""The scheduler process (python -m scheduler): arrives with the Scheduler issue."""
