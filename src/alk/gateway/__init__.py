"""The model gateway: alk serves the model a worker talks to."""
