"""Reports built from a run's saved result document and transcripts."""
