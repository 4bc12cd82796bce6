"""Transcripts: every repeat's events, one JSON object a line, redacted, bounded and hashed as
they are written (`writer`), and read back in pages of bounded memory (`reader`).
"""
