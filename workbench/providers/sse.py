"""An incremental decoder for server-sent events, following the WHATWG rules.

Feed it the raw bytes of a ``text/event-stream`` body in whatever chunks the network
delivers; it returns the events completed so far::

    decoder = SSEDecoder()
    for chunk in response.iter_bytes():
        for event in decoder.feed(chunk):
            handle(event.event, event.data)

The rules (HTML Living Standard, "Server-sent events", interpreting an event stream):
UTF-8 with an optional leading BOM; lines end in CRLF, LF or CR (a CRLF may straddle two
chunks); a line starting with ``:`` is a comment; ``field: value`` loses one space after
the colon; a line with no colon is a field with an empty value; ``data`` lines join with
``\\n``; ``event`` names the type (``message`` when unset); ``id`` sets the last event id
(ignored when it holds NUL) which later events keep; ``retry`` takes only ASCII digits;
unknown fields are ignored; a blank line dispatches the event unless no ``data`` came;
an unfinished event at the end of the stream is dropped.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event: its type, data, the last event id and any retry hint (ms)."""

    event: str = "message"
    data: str = ""
    id: str = ""
    retry: int | None = None


class SSEDecoder:
    """Turns chunks of an event stream into :class:`ServerSentEvent` objects."""

    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._started = False  # the BOM may only stand at the very start
        self._partial = ""  # the unfinished last line
        self._skip_lf = False  # the previous chunk ended in CR; a leading LF belongs to it
        self._data: list[str] = []
        self._event = ""
        self._last_id = ""
        self._retry: int | None = None
        self._fields_seen = False

    @property
    def pending(self) -> bool:
        """True when part of an event (or of a line) has arrived but not been dispatched."""
        return bool(self._partial or self._data or self._event or self._fields_seen)

    @property
    def last_event_id(self) -> str:
        return self._last_id

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode ``chunk`` and return the events it completes, in order."""
        text = self._text.decode(chunk)
        return self._feed_text(text) if text else []

    def close(self) -> list[ServerSentEvent]:
        """End of stream: finish the last line; an event without its blank line is dropped."""
        text = self._text.decode(b"", final=True)
        events = self._feed_text(text) if text else []
        if self._partial:
            self._line(self._partial, events)
            self._partial = ""
        self._data = []
        self._event = ""
        self._fields_seen = False
        return events

    def _feed_text(self, text: str) -> list[ServerSentEvent]:
        if not self._started:
            self._started = True
            if text.startswith("\ufeff"):
                text = text[1:]
        if self._skip_lf:
            self._skip_lf = False
            if text.startswith("\n"):
                text = text[1:]
        buffer = self._partial + text if self._partial else text
        if "\r" in buffer:
            lines = _LINE_BREAK.split(buffer)
            # A CR at the very end may be the first half of a CRLF still on the wire.
            self._skip_lf = buffer.endswith("\r")
        else:
            lines = buffer.split("\n")
        self._partial = lines.pop()
        events: list[ServerSentEvent] = []
        for line in lines:
            self._line(line, events)
        return events

    def _line(self, line: str, events: list[ServerSentEvent]) -> None:
        if not line:
            self._dispatch(events)
            return
        # Fast path for the overwhelmingly common line of model servers.
        if line.startswith("data: "):
            self._data.append(line[6:])
            return
        colon = line.find(":")
        if colon == 0:
            return  # comment
        if colon < 0:
            name, value = line, ""
        else:
            name = line[:colon]
            value = line[colon + 1 :]
            if value.startswith(" "):
                value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
            self._fields_seen = True
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry":
            if value and value.isascii() and value.isdigit():
                self._retry = int(value)

    def _dispatch(self, events: list[ServerSentEvent]) -> None:
        event_type = self._event or "message"
        self._event = ""
        self._fields_seen = False
        if not self._data:
            return
        data = "\n".join(self._data)
        self._data = []
        events.append(ServerSentEvent(event_type, data, self._last_id, self._retry))
