"""A small synchronous client for the daemon's ``Narratoria`` gRPC service.

Front-ends (the CLI, ``play``, tests, scripts) use this instead of the raw stubs so
that addressing, the daemon token and error messages are the same everywhere:

    with NarratoriaClient() as client:          # NARRATORIA_ADDRESS or the default socket
        session = client.create_session(campaign="demo")
        for event in client.turn(session.id, text="I look around"):
            print(event_to_dict(event))

Every gRPC failure surfaces as :class:`ClientError` (``str()`` is ``"CODE: message"``);
the one a user hits most, a daemon that is not running, names the socket it looked
for and how to start the daemon.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Iterator

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from narratoria.proto import narratoria_pb2 as pb, narratoria_pb2_grpc as rpc
from narratoria.runtime.host.endpoint import (
    TOKEN_ENV,
    TOKEN_METADATA,
    Endpoint,
    client_endpoint,
    default_socket,
    parse_address,
)
from narratoria.runtime.host.endpoint import client_token as find_daemon_token
from narratoria.runtime.host.identity import CLIENT_TOKEN_ENV, CLIENT_TOKEN_METADATA

__all__ = ["ClientError", "NarratoriaClient", "event_to_dict", "message_to_dict"]

# The channel options every client uses.
_CHANNEL_OPTIONS = [
    # The daemon is local (or on the LAN): an http_proxy in the environment must
    # not capture host:port targets.
    ("grpc.enable_http_proxy", 0),
    # A client waiting for a daemon that is starting (wait_ready) should notice it
    # within about a second, not after gRPC's default backoff of up to two minutes.
    # Not grpc.min_reconnect_backoff_ms: gRPC core takes it as the connection attempt's
    # timeout too (20 s by default), and at 100 ms a daemon on a busy machine that sent
    # its HTTP/2 SETTINGS a little late failed the call as "not answering" (seen in CI).
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # State trees travel as JSON text and may outgrow gRPC's 4 MiB default.
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
]
_POLL_INTERVAL_S = 0.05
# What gRPC core says when no connection could be made (as opposed to a daemon that
# answered UNAVAILABLE because it is shutting down).
_CONNECT_FAILURE_MARKERS = ("failed to connect", "connection refused", "no such file",
                            "connect failed", "socket closed", "connection reset")


class ClientError(Exception):
    """A failed call: ``code`` is the gRPC status name (``NOT_FOUND``...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def _start_hint(endpoint: Endpoint) -> str:
    if endpoint.unix_path is None:
        return f"start it with `narratoria serve --listen {endpoint.host}:{endpoint.port}`"
    if endpoint.unix_path == default_socket():
        return "start it with `narratoria serve`"
    return f"start it with `narratoria serve --socket {endpoint.unix_path}`"


def _not_running_message(endpoint: Endpoint, detail: str = "") -> str:
    """Why nothing answered at ``endpoint``, and how to fix it."""
    hint = _start_hint(endpoint)
    path = endpoint.unix_path
    if path is not None and not path.exists():
        return f"the daemon is not running at {path} (no socket there); {hint}"
    # gRPC's own words last: a stale socket, a full backlog and a process out of file
    # descriptors read alike otherwise.
    said = f" [{detail}]" if detail else ""
    if path is not None:
        return (f"the daemon is not answering at {path} (a stale socket from a daemon "
                f"that exited?); {hint}{said}")
    return f"the daemon is not reachable at {endpoint}{said}; {hint}"


def _wrap(exc: grpc.RpcError, endpoint: Endpoint, had_token: bool) -> ClientError:
    """A ClientError for a failed call, with guidance for the failures users cause."""
    status = exc.code() if hasattr(exc, "code") else None
    code = status.name if isinstance(status, grpc.StatusCode) else "UNKNOWN"
    detail = (exc.details() if hasattr(exc, "details") else None) or str(exc)
    no_socket = endpoint.unix_path is not None and not endpoint.unix_path.exists()
    if code == "UNAVAILABLE" and (no_socket or any(m in detail.lower()
                                                   for m in _CONNECT_FAILURE_MARKERS)):
        return ClientError(code, _not_running_message(endpoint, detail))
    if code == "UNAUTHENTICATED" and not had_token:
        return ClientError(code, f"{detail} (no daemon token was found: set {TOKEN_ENV} to the "
                                 "contents of the daemon's daemon.token, in its data dir or "
                                 "beside its socket)")
    if code == "DEADLINE_EXCEEDED":
        return ClientError(code, f"no answer from the daemon at {endpoint} in time ({detail})")
    return ClientError(code, detail)


def campaign_ref(value: str) -> str:
    """A campaign argument as the daemon needs it: an existing path made absolute (the
    daemon's working directory is not the caller's), anything else (an id) as given."""
    path = Path(value).expanduser()
    return str(path.resolve()) if value and path.exists() else value


CAMPAIGN_TIMEOUT_S = 300.0
# An import embeds again the memories it restores (seconds for a long playthrough).
EXPORT_TIMEOUT_S = 300.0
INGEST_TIMEOUT_S = 1800.0  # a 500-file campaign embeds for about a minute on 2 cores


class NarratoriaClient:
    """One channel to the daemon; every method is one RPC.

    ``endpoint``: an :class:`Endpoint`, an address string (``unix:///path.sock``,
    ``HOST:PORT``) or None for :func:`client_endpoint`. ``token``: the daemon token;
    when None it is found as ``runtime.endpoint.client_token`` says (``NARRATORIA_TOKEN``,
    the file beside the socket, the data dir's file) and sent on every call.
    ``client_token``: this front-end's own identity (``narratoria clients add``;
    default ``NARRATORIA_CLIENT_TOKEN``): it sees only the sessions it created; with
    one the call acts as that client, whether or not a daemon token goes with it.
    ``timeout_s`` bounds each unary call; a turn's stream gets ``turn_timeout_s``
    (None: no deadline, since a turn's length depends on the model and the skills).
    """

    def __init__(self, endpoint: Endpoint | str | None = None, token: str | None = None,
                 timeout_s: float = 30.0, turn_timeout_s: float | None = None,
                 client_token: str | None = None) -> None:
        if endpoint is None:
            endpoint = client_endpoint()
        elif isinstance(endpoint, str):
            endpoint = parse_address(endpoint)
        self.endpoint: Endpoint = endpoint
        if token is None:
            token = find_daemon_token(endpoint)
        self._token = token
        # The daemon refuses front-end calls that carry neither the daemon token nor a
        # client token, on the unix socket too (a skill process can connect to it).
        if client_token is None:
            client_token = os.environ.get(CLIENT_TOKEN_ENV) or None
        self._metadata: tuple[tuple[str, str], ...] = (
            *(((TOKEN_METADATA, token),) if token else ()),
            *(((CLIENT_TOKEN_METADATA, client_token),) if client_token else ()))
        self.timeout_s = timeout_s
        self.turn_timeout_s = turn_timeout_s
        self.channel = grpc.insecure_channel(endpoint.grpc_target, options=_CHANNEL_OPTIONS)
        self.stub = rpc.NarratoriaStub(self.channel)

    # -- lifecycle ---------------------------------------------------------------

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "NarratoriaClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"NarratoriaClient({str(self.endpoint)!r})"

    # -- plumbing ----------------------------------------------------------------

    def _call(self, method: str, request: Message, *, timeout_s: float | None = None,
              wait_for_ready: bool = False) -> Any:
        try:
            return getattr(self.stub, method)(
                request, timeout=self.timeout_s if timeout_s is None else timeout_s,
                metadata=self._metadata, wait_for_ready=wait_for_ready)
        except grpc.RpcError as exc:
            raise _wrap(exc, self.endpoint, bool(self._metadata)) from None

    # -- the service -------------------------------------------------------------

    def status(self) -> pb.StatusResponse:
        return self._call("Status", pb.StatusRequest())

    def wait_ready(self, timeout_s: float = 10.0) -> pb.StatusResponse:
        """Poll ``status()`` until the daemon answers (for scripts that just started it).

        Raises ClientError UNAVAILABLE if it does not answer within ``timeout_s``; any
        other error (a bad token, say) means the daemon is up, so it is raised at once.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ClientError("UNAVAILABLE", f"no answer within {timeout_s:g}s: "
                                                 f"{_not_running_message(self.endpoint)}")
            try:
                # wait_for_ready: the call waits for the connection instead of failing
                # fast, so a daemon that binds its socket mid-poll is picked up.
                return self._call("Status", pb.StatusRequest(), timeout_s=min(left, 1.0),
                                  wait_for_ready=True)
            except ClientError as exc:
                if exc.code not in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
                    raise
            time.sleep(min(_POLL_INTERVAL_S, max(deadline - time.monotonic(), 0)))

    def create_session(self, campaign: str = "", title: str = "",
                       state: dict[str, Any] | None = None, character_id: str = "") -> pb.Session:
        """A new session; ``state``: its initial state tree, whose ``npcs`` map declares
        the session's NPCs (id -> {"name", "traits"?, "voice"?, "knows"?: [facts]})."""
        # A campaign's first session ingests it (embedding: seconds to a minute).
        return self._call("CreateSession", pb.CreateSessionRequest(
            campaign=campaign, title=title, state_json=json.dumps(state) if state else "",
            character_id=character_id),
            timeout_s=max(self.timeout_s, CAMPAIGN_TIMEOUT_S) if campaign else None)

    def ingest_campaign(self, campaign: str) -> Iterator[pb.IngestProgress]:
        """Ingest a campaign (an id, or a path the daemon can read) in the daemon's
        store: progress messages, the last one (phase "complete") with the result."""
        try:
            call = self.stub.IngestCampaign(pb.IngestCampaignRequest(campaign=campaign),
                                            timeout=max(self.timeout_s, INGEST_TIMEOUT_S),
                                            metadata=self._metadata)
            yield from call
        except grpc.RpcError as exc:
            raise _wrap(exc, self.endpoint, bool(self._metadata)) from None

    def cancel_turn(self, session_id: str) -> pb.CancelTurnResponse:
        """Cancel the session's turn in flight: its skills are killed, nothing is stored."""
        return self._call("CancelTurn", pb.SessionRef(session_id=session_id))

    def branch(self, session_id: str, at_scene: int = 0) -> pb.Session:
        """A new session retrying ``session_id`` from scene ``at_scene`` (0: the last
        scene); the old session is untouched and can still be played."""
        return self._call("Branch", pb.BranchRequest(session_id=session_id, at_scene=at_scene))

    def export_session(self, session_id: str) -> pb.SessionArchive:
        """The session as a .narratorio-full archive (its bytes in ``archive``)."""
        return self._call("ExportSession", pb.SessionRef(session_id=session_id),
                          timeout_s=max(self.timeout_s, EXPORT_TIMEOUT_S))

    def import_session(self, archive: bytes) -> pb.ImportSessionResponse:
        """Restore a .narratorio-full archive as a new session (never overwriting one)."""
        return self._call("ImportSession", pb.ImportSessionRequest(archive=archive),
                          timeout_s=max(self.timeout_s, EXPORT_TIMEOUT_S))

    def list_sessions(self, include_ended: bool = False) -> list[pb.Session]:
        reply = self._call("ListSessions", pb.ListSessionsRequest(include_ended=include_ended))
        return list(reply.sessions)

    def resume_session(self, session_id: str) -> pb.Session:
        return self._call("ResumeSession", pb.SessionRef(session_id=session_id))

    def end_session(self, session_id: str) -> pb.Session:
        return self._call("EndSession", pb.SessionRef(session_id=session_id))

    def get_state(self, session_id: str) -> pb.SessionState:
        return self._call("GetState", pb.SessionRef(session_id=session_id))

    def list_skills(self, session_id: str = "") -> list[pb.SkillInfo]:
        return list(self._call("ListSkills", pb.ListSkillsRequest(session_id=session_id)).skills)

    # -- front-end data (web and other graphical front-ends) -----------------------

    def list_campaigns(self) -> list[pb.CampaignInfo]:
        """The campaigns a player can start (built-in, then the user's), validated."""
        return list(self._call("ListCampaigns", pb.ListCampaignsRequest(),
                               timeout_s=max(self.timeout_s, 60.0)).campaigns)

    def get_session_view(self, session_id: str) -> pb.SessionView:
        """What a page draws for the session: state without hidden stats, visible stats,
        icons (docs/campaigns.md, "Icons"), inventory, NPCs, choices (``*_json`` fields
        hold JSON)."""
        return self._call("GetSessionView", pb.SessionRef(session_id=session_id))

    def list_assets(self, session_id: str) -> list[pb.AssetInfo]:
        return list(self._call("ListAssets", pb.SessionRef(session_id=session_id)).assets)

    def get_asset(self, session_id: str, path: str) -> pb.Asset:
        """One asset's bytes: ``campaign/<rel>`` or ``data/<rel>`` (at most 16 MiB)."""
        return self._call("GetAsset", pb.AssetRequest(session_id=session_id, path=path))

    def get_skill_config(self, skill: str) -> pb.SkillConfigView:
        return self._call("GetSkillConfig", pb.SkillConfigRequest(skill=skill))

    def set_skill_config(self, skill: str, set: dict[str, str] | None = None,
                         unset: list[str] | None = None) -> pb.SkillConfigView:
        """Save settings, all or nothing: ``saved`` is False (and ``problems`` names each
        field) when any value is refused; values are text as ``--set key=value`` takes."""
        return self._call("SetSkillConfig", pb.SetSkillConfigRequest(
            skill=skill, set=dict(set or {}), unset=list(unset or [])))

    def set_skill_enabled(self, skill: str, enabled: bool) -> pb.SkillConfigView:
        return self._call("SetSkillEnabled", pb.SetSkillEnabledRequest(skill=skill,
                                                                       enabled=enabled))

    def list_characters(self) -> list[pb.CharacterInfo]:
        return list(self._call("ListCharacters", pb.ListCharactersRequest()).characters)

    def get_character_portrait(self, character_id: str) -> pb.Asset:
        return self._call("GetCharacterPortrait", pb.CharacterRef(id=character_id))

    def save_character(self, description: str = "", portrait: bytes = b"", name: str = "",
                       character_id: str = "") -> pb.CharacterInfo:
        """Create (no ``character_id``) or edit a fresh character; on edit an empty
        field keeps its value. A refused field: ClientError INVALID_ARGUMENT whose
        message starts with the field (description, portrait, name)."""
        return self._call("SaveCharacter", pb.SaveCharacterRequest(
            id=character_id, description=description, name=name, portrait=portrait))

    def delete_character(self, character_id: str) -> pb.CharacterInfo:
        return self._call("DeleteCharacter", pb.CharacterRef(id=character_id))

    def turn(self, session_id: str, text: str | None = None, choice: int | None = None, *,
             plan_json: str | None = None, execute_only: bool = False) -> Iterator[pb.TurnEvent]:
        """Play one turn: free ``text`` or a 1-based ``choice``, exactly one of them
        (optional with ``plan_json``, a plan to run instead of planning one;
        ``execute_only``: its skills only, no model narration or choices).

        Yields events as the daemon streams them. Leaving the loop early cancels the
        stream only: the daemon still completes and stores the turn.
        """
        if text is not None and choice is not None or (
                text is None and choice is None and plan_json is None):
            raise ClientError("INVALID_ARGUMENT", "a turn takes exactly one of text or choice")
        request = pb.TurnRequest(session_id=session_id, plan_json=plan_json or "",
                                 execute_only=execute_only)
        if text is not None:
            request.text = text
        elif choice is not None:
            request.choice = choice
        return self._stream_turn(request)

    def _stream_turn(self, request: pb.TurnRequest) -> Iterator[pb.TurnEvent]:
        try:
            call = self.stub.Turn(request, timeout=self.turn_timeout_s, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise _wrap(exc, self.endpoint, bool(self._metadata)) from None
        try:
            yield from call
        except grpc.RpcError as exc:
            raise _wrap(exc, self.endpoint, bool(self._metadata)) from None
        finally:
            call.cancel()  # a no-op once the stream has ended


# -- JSON views ------------------------------------------------------------------------

def _parse_json_fields(doc: Any) -> Any:
    """Replace every ``x_json`` string by its parsed value under ``x`` (None if empty).

    Only the protobuf dict is walked: values parsed here are documents from other
    specs and are left exactly as they are. Text that does not parse stays under
    its ``x_json`` key, so nothing is lost.
    """
    if isinstance(doc, list):
        return [_parse_json_fields(item) for item in doc]
    if not isinstance(doc, dict):
        return doc
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if key.endswith("_json") and isinstance(value, str):
            try:
                out[key[:-len("_json")]] = json.loads(value) if value else None
                continue
            except ValueError:
                pass
        out[key] = _parse_json_fields(value)
    return out


def message_to_dict(message: Message) -> dict[str, Any]:
    """A protobuf message as a JSON-ready dict for ``--json`` output.

    Field names as in the .proto, every field present (``ok: false`` is not left
    out), int64 values as numbers, and each ``*_json`` text field parsed into an
    object under the name without ``_json`` (``state_json`` -> ``state``).
    """
    doc = json_format.MessageToDict(message, preserving_proto_field_name=True,
                                    always_print_fields_with_no_presence=True,
                                    unquote_int64_if_possible=True)
    return _parse_json_fields(doc)


def event_to_dict(ev: pb.TurnEvent) -> dict[str, Any]:
    """A TurnEvent as a dict: :func:`message_to_dict` plus ``kind``, the name of the
    event set in its oneof (``narration``, ``tool_event``, ``done``...)."""
    doc = message_to_dict(ev)
    doc["kind"] = ev.WhichOneof("event")
    return doc
