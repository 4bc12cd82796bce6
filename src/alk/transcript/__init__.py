"""Transcripts: every repeat's events, one JSON object a line, redacted, bounded and hashed as
they are written, and read back in pages of bounded memory.
"""
