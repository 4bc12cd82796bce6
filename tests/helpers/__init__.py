"""What the tests share: records, lanes, runners and documents made for them, on `sys.path` as
`helpers` (`pythonpath` in pyproject.toml), so that a test in any folder imports them alike."""
