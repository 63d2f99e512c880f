"""The controller-manager process (python -m controllers): arrives with its issue."""
