"""Qt item models: sessions, the timeline, search results."""

from PySide6.QtCore import QModelIndex, QPersistentModelIndex

ModelIndex = QModelIndex | QPersistentModelIndex
"""What Qt hands a model's and a delegate's methods as an index."""
