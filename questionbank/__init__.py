"""The question bank: the outline as data, items as YAML, and the loader/checker."""
