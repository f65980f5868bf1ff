"""The inputs stage: files become validated conversations. `files` resolves the paths and reads
each file once, `formats` turns each record (turns or OpenAI messages; JSONL, JSON, YAML) into a
`conversation` or problems naming file, line and field, and `selection` chooses what a run judges."""
