"""`narratoria web`: the web front-end, a gateway (HTTP, a gRPC client of the daemon)
serving the page (``clients/web/``)."""

from __future__ import annotations

import argparse

from narratoria.clients.output import ExitCode, fail


def cmd_web(args: argparse.Namespace) -> int:
    from narratoria.clients.web.gateway import DEFAULT_MAX_BODY, GatewayError, parse_size
    from narratoria.clients.web.gateway import serve as serve_web

    try:
        max_body = parse_size(args.max_body) if args.max_body else DEFAULT_MAX_BODY
    except GatewayError as exc:
        return fail(str(exc), ExitCode.BAD_INPUT)
    if args.wait is not None and args.wait <= 0:
        return fail(f"--wait {args.wait:g}: expected a number of seconds above 0 "
                    "(leave it out to wait for the daemon as long as it takes)", ExitCode.BAD_INPUT)
    return serve_web(listen=args.listen, socket=args.socket, token=args.token,
                     allow_hosts=args.allow_host or (), max_body=max_body, json_output=args.json,
                     wait_s=args.wait)


def register(sub: argparse._SubParsersAction) -> None:
    web = sub.add_parser("web", help="the web front-end: serve the page (a client of the daemon)",
                         description="Serve the web page on http://127.0.0.1:8765/ (--listen). "
                                     "Each start makes a new browser token and prints the URL "
                                     "to open (http://HOST:PORT/?token=...); every request "
                                     "needs it (a cookie that URL sets, or Authorization: "
                                     "Bearer), on loopback too. The page is served at once: "
                                     "when the daemon is not up yet (it loads for 15-30 s) or "
                                     "restarts, the gateway waits for it and reconnects by "
                                     "itself, and the page shows that it is waiting.")
    web.add_argument("--listen", metavar="HOST:PORT", help="where to serve (default 127.0.0.1:8765)")
    web.add_argument("--socket", metavar="PATH", help="the daemon's unix socket "
                                                      "(default: NARRATORIA_ADDRESS or the data dir's)")
    web.add_argument("--token", metavar="TOKEN", help="the daemon token, for the daemon only "
                                                      "(default: NARRATORIA_TOKEN or daemon.token); "
                                                      "browsers never see it")
    web.add_argument("--allow-host", metavar="NAME", action="append",
                     help="one more name browsers may reach the gateway by (its Host header), "
                          "besides localhost, 127.0.0.1, [::1] and the --listen host; repeatable")
    web.add_argument("--max-body", metavar="SIZE", help="the largest request body, e.g. 8M "
                                                        "(default 8M: a 5 MiB portrait as base64)")
    web.add_argument("--wait", metavar="SECONDS", type=float,
                     help="give up (exit 1) if no daemon has answered SECONDS after the start "
                          "(default: wait as long as it takes; a daemon that goes away later "
                          "is always waited for)")
    web.add_argument("--json", action="store_true",
                     help="print {url, token, port, ...} as one JSON line on stdout once listening")
    web.set_defaults(func=cmd_web)
