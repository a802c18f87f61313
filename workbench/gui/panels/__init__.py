"""The parts of the main window: session browser, timeline, search, composer."""
