"""Reports built from a run's saved result document and transcripts; nothing here runs a worker.

- `terminal`: the run report on a terminal; `matrix`, `compare_view`, `transcript_view`,
  `listings` and `progress`: the other views of the CLI;
- `html`: report.html and the compare page; `markdown`: report.md; `junit`: junit.xml;
  `outputs`: writing those three files;
- `format` and `safe_text`: what every report says alike, and how worker text is made safe.
"""
