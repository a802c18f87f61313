"""Old home of :class:`~workbench.gui.panels.savings_bar.SavingsBarWidget`, kept only
until the compaction panel imports it from ``savings_bar`` (the request inspector's
``TokenBarWidget`` is the one widget of that name)."""

from workbench.gui.panels.savings_bar import SavingsBarWidget as TokenBarWidget

__all__ = ["TokenBarWidget"]
