"""The `ctxproxy` command: serve, policy check/schema, prepare (offline dry run)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from proxy.settings import ConfigError, load_settings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctxproxy", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the proxy")
    serve.add_argument("--config", help="config.yaml (default: the embedded default)")
    serve.add_argument("--host", help="override server.host")
    serve.add_argument("--port", type=int, help="override server.port")
    policy = sub.add_parser("policy", help="policy files")
    policy_sub = policy.add_subparsers(dest="policy_command", required=True)
    check = policy_sub.add_parser("check", help="validate every policy file in a directory")
    check.add_argument("directory", nargs="?", default="policies")
    schema = policy_sub.add_parser("schema", help="write the JSON schema of policy files")
    schema.add_argument("--out", default="policies/schema.json")
    prepare = sub.add_parser("prepare", help="prepare a request offline and print the manifest")
    prepare.add_argument("request", help="a chat-completion request body (JSON file)")
    prepare.add_argument("--policy", help="policy YAML file (default: the bundled default)")
    prepare.add_argument("--model", help="override the request's model")
    prepare.add_argument("--out", help="write the prepared body here (default: stdout)")
    return parser


def _serve(args: argparse.Namespace) -> int:
    from proxy.app import create_app
    from proxy.http.server import run_app
    from proxy.logs import configure_logging

    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    configure_logging(settings.server.log_level, settings.server.log_format)
    host = args.host or settings.server.host
    port = settings.server.port if args.port is None else args.port
    run_app(
        create_app(settings),
        host=host,
        port=port,
        limits=settings.server,
        print=lambda _: print(f"ctxproxy listening on http://{host}:{port}"),
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "policy":
        from pathlib import Path

        from proxy.policy import cli as policy_cli

        if args.policy_command == "check":
            return policy_cli.check(Path(args.directory), sys.stdout)
        policy_cli.write_schema(Path(args.out))
        return 0
    from proxy.prepare_cli import run_prepare

    return run_prepare(args.request, args.policy, args.model, args.out)


if __name__ == "__main__":
    sys.exit(main())
