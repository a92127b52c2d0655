"""The ``symmetric_accuracy`` evaluate module (load it with ``evaluate.load`` on this folder)."""
