"""Item painting: message bubbles and session rows."""
