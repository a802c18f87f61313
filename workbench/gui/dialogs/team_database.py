"""File → Open Team Database: the address of a database on a PostgreSQL server, and
optionally its password (SPEC §10).

The dialog only asks; the main window opens the store through the Open Database path
(:class:`~workbench.gui.dialogs.open_database.OpenDatabaseDialog`, on a worker with
progress). The address is checked here without touching the network (a sentence under
the field when it is not a ``postgresql://`` URL). A password written into the address
moves to the Password field, which does not show it. The password stays in this dialog's
field and the open that uses it: it is never written to the settings; "Remember in the
system keyring" hands it to the OS keyring once the store has opened with it.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.team import EXAMPLE_URL, split_password, team_address
from workbench.errors import WorkbenchError
from workbench.gui.controls import named, note_label
from workbench.gui.theme import set_tone

TITLE = "Open Team Database"


class TeamDatabaseDialog(QDialog):
    """Asks for a team store's URL and an optional password (see the module docstring)."""

    def __init__(self, parent: QWidget | None = None, *, address: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle(TITLE)
        self.setAccessibleName(TITLE)
        self.setMinimumWidth(480)
        intro = QLabel(
            "A workbench database on a PostgreSQL server, shared by a team or by your "
            "desktops: each window shows the others' changes within a second.", self)
        intro.setWordWrap(True)
        self.url_edit = named(QLineEdit(address, self), "Team database URL",
                              placeholder=EXAMPLE_URL,
                              tip="postgresql://user@host:port/database")
        self.password_edit = named(QLineEdit(self), "Password",
                                   placeholder="Optional",
                                   tip="Used for this connection; kept only if you tick "
                                       "Remember in the system keyring")
        self.password_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.remember_box = named(QCheckBox("&Remember in the system keyring", self),
                                  "Remember in the system keyring")
        self.remember_box.setEnabled(False)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        address_label = QLabel("&Address:", self)
        address_label.setBuddy(self.url_edit)
        password_label = QLabel("&Password:", self)
        password_label.setBuddy(self.password_edit)
        form.addRow(address_label, self.url_edit)
        form.addRow(password_label, self.password_edit)
        form.addRow("", self.remember_box)
        self.problem_label = note_label(self, "Address problem")
        set_tone(self.problem_label, "bad")
        self.problem_label.hide()
        hint = note_label(self, "Where the password comes from")
        hint.setText("Without a password here, the one in the system keyring, PGPASSWORD "
                     "or ~/.pgpass is used. The workbench never writes a password to its "
                     "settings.")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.open_button = self.buttons.addButton("&Open",
                                                  QDialogButtonBox.ButtonRole.AcceptRole)
        self.open_button.setDefault(True)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addWidget(self.problem_label)
        layout.addWidget(hint)
        layout.addStretch(1)
        layout.addWidget(self.buttons)

        self.url_edit.textChanged.connect(self._edited)
        self.url_edit.editingFinished.connect(self._take_password)
        self.password_edit.textChanged.connect(self._edited)
        self._edited()
        self.url_edit.setFocus()
        self.url_edit.selectAll()

    def _edited(self) -> None:
        self.open_button.setEnabled(bool(self.url_edit.text().strip()))
        has_password = bool(self.password_edit.text())
        self.remember_box.setEnabled(has_password)
        if not has_password:
            self.remember_box.setChecked(False)
        self.problem_label.hide()

    def _take_password(self) -> None:
        """A password written into the address moves to the Password field, where it is
        not shown (one typed there already is the one used)."""
        url, password = split_password(self.url_edit.text().strip())
        if password is None:
            return
        self.url_edit.setText(url)
        if not self.password_edit.text():
            self.password_edit.setText(password)

    # -- what was asked for -------------------------------------------------------------

    def url(self) -> str:
        return self.url_edit.text().strip()

    def password(self) -> str | None:
        """The password typed (None when the field is empty)."""
        return self.password_edit.text() or None

    def remember(self) -> bool:
        """Whether the password is to go to the system keyring once the store opens."""
        return self.remember_box.isChecked() and self.password() is not None

    def accept(self) -> None:
        """Open only an address that reads as a team store's; else say why here."""
        self._take_password()
        try:
            team_address(self.url())
        except WorkbenchError as exc:
            self.problem_label.setText(str(exc))
            self.problem_label.show()
            self.url_edit.setFocus()
            return
        super().accept()
