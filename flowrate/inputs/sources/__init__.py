"""Source formats: one reader per place conversations are logged (flowrate's own turns, OpenAI
messages, traces, platform exports), behind one interface.

A file is decoded into items by its container (`containers`: JSONL lines, a JSON document's
list, YAML, Parquet or CSV rows); a reader turns items into conversations. A reader says what
is wrong with an item it cannot take (`Reader.problem`), so the format of a file is found from
its first item (`detect`) unless `--format` names it, and a file no reader takes is refused
with the formats tried and the closest one's complaint.

To add a source: a module here with a `Reader` subclass, listed in `registry.readers()` (in the order they
are tried), a sample and its fields in `docs/input.md`, and its tests in `tests/inputs/sources/`.
"""
