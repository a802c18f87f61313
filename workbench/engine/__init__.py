"""Use cases that join the layers: workspace, importing, exporting, memory."""
