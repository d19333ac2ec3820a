"""The chat side of the PyTorch quizmaster: platform-neutral core, storage, platform adapters.

Nothing under `bot/` imports torch: code runs in the runner service.
"""
