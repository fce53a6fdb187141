"""Reading and writing: caption files and in-memory inputs (:mod:`.files`, :mod:`.inputs`),
videos and frame folders (:mod:`.video` and its parts), atomic writes of result files.
Importing this package loads nothing heavy."""
