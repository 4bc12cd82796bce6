"""Running one worker: the request, protocol v1, and the contained local process."""
