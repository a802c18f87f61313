"""``workbench providers …``: add, edit, list, remove and test model server configs.

Configs never hold a key: ``--api-key-env VAR`` names an environment variable and
``--keyring-entry E`` an OS keyring entry (service ``conversation-workbench``, user ``E``,
or ``SERVICE:USER``) where the key is looked up at the moment of use.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from workbench.cli.common import open_workspace, positive_int, print_json
from workbench.core.provider import PROVIDER_KINDS, ProviderConfig
from workbench.errors import WorkbenchError

EXIT_FAILED = 1


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name.strip(), value.strip()


def cmd_add(args: argparse.Namespace) -> int:
    config = ProviderConfig(name=args.name, timeouts=_timeouts(args),
                            **_option_fields(args, editing=False))
    with open_workspace(args) as ws:
        stored = ws.provider_settings().add(config)
    if args.json:
        print_json(stored.to_json())
    else:
        print(f"Added provider {stored.name!r}: {stored.kind} {stored.model} at {stored.base_url}.")
    return 0


def _key_text(config: ProviderConfig) -> str:
    if config.api_key_keyring and config.api_key_env:
        return f"keyring:{config.api_key_keyring} / env:{config.api_key_env}"
    if config.api_key_keyring:
        return f"keyring:{config.api_key_keyring}"
    if config.api_key_env:
        return f"env:{config.api_key_env}"
    return "-"


def cmd_list(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        configs = ws.provider_settings().list()
    if args.json:
        print_json([c.to_json() for c in configs])
        return 0
    if not configs:
        print("No providers yet. Add one with: workbench providers add NAME --kind openai "
              "--base-url URL --model MODEL")
        return 0
    rows: list[tuple[Any, ...]] = [("NAME", "KIND", "MODEL", "BASE URL", "KEY", "CONTEXT")]
    for c in configs:
        rows.append((c.name, c.kind, c.model, c.base_url, _key_text(c),
                     c.context_window or "-"))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        ws.provider_settings().remove(args.name)
        orphans = [a.name for a in ws.list_agents() if a.provider == args.name]
    if args.json:
        print_json({"removed": args.name, "agents_without_provider": orphans})
    else:
        print(f"Removed provider {args.name!r}.")
        for name in orphans:
            print(f"Note: agent {name!r} used it; give it another with: workbench agents "
                  f"edit {name!r} --provider NAME", file=sys.stderr)
    return 0


def cmd_test(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        report = ws.provider_settings().test(args.name)
    if args.json:
        print_json(report.to_json())
    else:
        for notice in report.notices:
            print(f"Note: {notice}", file=sys.stderr)
        if report.ok:
            print(report.sentence)
        else:
            print(f"workbench: {report.sentence}", file=sys.stderr)
    return 0 if report.ok else EXIT_FAILED


def _config_options(p: argparse.ArgumentParser, *, adding: bool) -> None:
    """The options of a config, shared by ``add`` (kind, URL and model required) and
    ``edit`` (every option optional; an empty key reference clears it)."""
    p.add_argument("--kind", required=adding, choices=PROVIDER_KINDS,
                   help="the API the server speaks")
    p.add_argument("--base-url", required=adding, metavar="URL",
                   help="e.g. http://127.0.0.1:8080, https://api.openai.com/v1, "
                   "https://api.anthropic.com")
    p.add_argument("--model", required=adding, metavar="M", help="the model to ask for")
    clear = "" if adding else " (an empty value clears it)"
    p.add_argument("--api-key-env", metavar="VAR",
                   help="the environment variable that holds the API key" + clear)
    p.add_argument("--keyring-entry", metavar="E",
                   help="the OS keyring entry that holds the API key" + clear)
    p.add_argument("--context-window", type=positive_int, metavar="N",
                   help="tokens, used when the server does not say and the model is unknown")
    p.add_argument("--max-output-tokens", type=positive_int, metavar="N",
                   help="the most tokens a reply may have")
    p.add_argument("--temperature", type=float, metavar="T", help="sampling temperature")
    p.add_argument("--header", type=_header, action="append", metavar="NAME=VALUE",
                   help="an extra header for every request (not for secrets)"
                   + ("" if adding else "; replaces the stored headers"))
    p.add_argument("--timeout-connect", type=float, metavar="S", help="seconds to connect")
    p.add_argument("--timeout-read", type=float, metavar="S",
                   help="seconds to wait for each piece of the reply")
    p.add_argument("--timeout-total", type=float, metavar="S",
                   help="seconds for the whole request")


def _timeouts(args: argparse.Namespace) -> dict[str, float | None]:
    timeouts: dict[str, float | None] = {}
    for name in ("connect", "read", "total"):
        value = getattr(args, f"timeout_{name}")
        if value is not None:
            timeouts[name] = value
    return timeouts


def _option_fields(args: argparse.Namespace, *, editing: bool) -> dict[str, Any]:
    """The config fields the options give (those not given are left out); when
    ``editing``, an empty key reference clears it."""
    fields: dict[str, Any] = {}
    for option in ("kind", "base_url", "model", "context_window", "max_output_tokens",
                   "temperature"):
        value = getattr(args, option)
        if value is not None:
            fields[option] = value
    for option, name in (("api_key_env", "api_key_env"), ("keyring_entry", "api_key_keyring")):
        value = getattr(args, option)
        if value is not None:
            fields[name] = (value.strip() or None) if editing else value
    if args.header is not None:
        fields["extra_headers"] = dict(args.header)
    return fields


def cmd_edit(args: argparse.Namespace) -> int:
    fields = _option_fields(args, editing=True)
    if args.new_name is not None:
        fields["name"] = args.new_name
    with open_workspace(args) as ws:
        settings = ws.provider_settings()
        timeouts = _timeouts(args)
        if timeouts:
            fields["timeouts"] = dict(settings.get(args.name).timeouts) | timeouts
        if not fields:
            raise WorkbenchError("Nothing to change: give at least one option, such as "
                                 "--base-url URL or --model M.")
        stored = settings.update(args.name, **fields)
    if args.json:
        print_json(stored.to_json())
    else:
        print(f"Updated provider {stored.name!r}: {stored.kind} {stored.model} at "
              f"{stored.base_url}.")
    return 0


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add ``providers`` and its subcommands to the ``workbench`` parser."""
    parser = subparsers.add_parser("providers", parents=[common],
                                   help="model servers: add, edit, list, remove, test")
    sub = parser.add_subparsers(dest="providers_command", metavar="ACTION", required=True)

    p = sub.add_parser("add", parents=[common], help="add a provider (the key stays outside)")
    p.add_argument("name")
    _config_options(p, adding=True)
    p.set_defaults(func=cmd_add)

    p = sub.add_parser("edit", parents=[common],
                       help="change fields of a provider (only the options given)")
    p.add_argument("name", help="the provider's current name")
    p.add_argument("--name", dest="new_name", metavar="NEW", help="rename the provider")
    _config_options(p, adding=False)
    p.set_defaults(func=cmd_edit)

    p = sub.add_parser("list", parents=[common], help="list providers")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("remove", parents=[common], help="remove a provider")
    p.add_argument("name")
    p.set_defaults(func=cmd_remove)

    p = sub.add_parser("test", parents=[common], help="send a one-token request")
    p.add_argument("name")
    p.set_defaults(func=cmd_test)
