"""What every layer may use: the error hierarchy, writes that never leave half a file, a
write its disk refused said in one line (disk), where the recipe files and the cache live,
the engine's interface and a pool of engines, an image's files as facts, the failpoints
tests stop a run at, and "did you mean".

Imports nothing of the project; reaches nothing beyond this process.
"""
