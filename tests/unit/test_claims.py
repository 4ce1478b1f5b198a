"""The service plane's claim (services/core/grpc/claims.py), its key file and
the listen/dial settings."""

from __future__ import annotations

import base64
import json
import stat

import pytest

from services.core.grpc.claims import (
    Claim,
    ClaimRefused,
    ClaimSigner,
    check_key,
    sign_claim,
    verify_claim,
)
from services.core.grpc.plane import CLAIM_KEY_FILE_NAME, ServicePlane, load_or_create_claim_key
from services.core.settings import Settings

KEY = b"k" * 32
NOW = 1_800_000_000.0


def reason(token, *, key=KEY, now=NOW, skew=5.0) -> str:
    with pytest.raises(ClaimRefused) as refused:
        verify_claim(key, token, now=now, skew=skew)
    return refused.value.reason


def test_a_signed_claim_verifies_with_every_field():
    token = sign_claim(KEY, "acme", "write", 10, "tok-1", ttl=60, now=NOW)
    assert verify_claim(KEY, token, now=NOW + 30) == Claim("acme", "write", 10, "tok-1", NOW + 60)
    bare = verify_claim(KEY, sign_claim(KEY, None, "admin", now=NOW), now=NOW)
    assert (bare.tenant, bare.memory_limit, bare.actor, bare.admin) == (None, None, None, True)


def test_an_expired_claim_is_refused_past_the_skew_allowance():
    token = sign_claim(KEY, "acme", "read", ttl=60, now=NOW)
    assert verify_claim(KEY, token, now=NOW + 64, skew=5).tenant == "acme"  # within the allowance
    assert reason(token, now=NOW + 66, skew=5) == "EXPIRED"
    assert reason(token, now=NOW + 61, skew=0) == "EXPIRED"


def test_another_key_or_a_changed_payload_is_a_bad_signature():
    token = sign_claim(KEY, "acme", "read", now=NOW)
    assert reason(token, key=b"x" * 32) == "BAD_SIGNATURE"
    payload, mac = token.split(".")
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    for change in ({"t": "other"}, {"r": "admin"}, {"m": 10**9}, {"e": NOW + 10**6}):
        forged = base64.urlsafe_b64encode(json.dumps({**body, **change}).encode()).rstrip(b"=").decode()
        assert reason(f"{forged}.{mac}") == "BAD_SIGNATURE"
    # Leaving the memory limit out cannot lift it: the payload without "m" is another payload.
    limited = sign_claim(KEY, "acme", "write", 5, now=NOW)
    payload, mac = limited.split(".")
    unlimited = {k: v for k, v in json.loads(base64.urlsafe_b64decode(payload + "==")).items() if k != "m"}
    stripped = base64.urlsafe_b64encode(json.dumps(unlimited).encode()).rstrip(b"=").decode()
    assert reason(f"{stripped}.{mac}") == "BAD_SIGNATURE"


@pytest.mark.parametrize("token", [None, ""])
def test_no_claim_is_missing(token):
    assert reason(token) == "MISSING"


@pytest.mark.parametrize("token", ["acme", ".", "abc.", ".abc", "é.x", "a.b.c"])
def test_what_is_no_claim_is_refused(token):
    assert reason(token) in ("MALFORMED", "BAD_SIGNATURE")


def test_a_signed_payload_of_the_wrong_shape_is_malformed():
    from services.core.grpc.claims import _b64, _mac

    for body in (b"[]", b"{}", b'{"r":"read"}', b'{"t":"","r":"read","e":1}', b'{"t":"a","r":"read","e":1,"m":-1}'):
        payload = _b64(body)
        assert reason(f"{payload}.{_mac(KEY, payload)}") == "MALFORMED"


def test_a_short_key_is_refused():
    with pytest.raises(ValueError, match="SERVICE_CLAIM_KEY"):
        check_key(b"short")
    with pytest.raises(ValueError):
        Settings(_env_file=None, service_claim_key="short")


def test_the_signer_puts_a_fresh_claim_in_the_metadata():
    [(name, token)] = ClaimSigner(KEY, 30, "system:enrich").metadata("acme", "read")
    assert name == "x-memgrid-claim"
    claim = verify_claim(KEY, token)
    assert (claim.tenant, claim.role, claim.actor) == ("acme", "read", "system:enrich")


def test_the_key_file_is_made_once_readable_by_its_owner_only(tmp_path):
    key = load_or_create_claim_key(tmp_path)
    path = tmp_path / CLAIM_KEY_FILE_NAME
    assert len(key) >= 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_claim_key(tmp_path) == key
    assert load_or_create_claim_key(tmp_path / "other") != key
    # SERVICE_CLAIM_KEY wins over the file.
    settings = Settings(_env_file=None, memgrid_data_dir=tmp_path, service_claim_key="s" * 40)
    assert ServicePlane.from_settings(settings).key == b"s" * 40
    assert ServicePlane.from_settings(Settings(_env_file=None, memgrid_data_dir=tmp_path)).key == key


def test_listening_and_dialling_are_separate_settings():
    plain = Settings(_env_file=None)
    assert (plain.listen_host, plain.grpc_target("recall")) == ("127.0.0.1", "127.0.0.1:50052")
    pod = Settings(_env_file=None, grpc_listen_host="0.0.0.0", recall_addr="recall.memgrid:50052")
    assert (pod.listen_host, pod.grpc_target("recall"), pod.grpc_target("ingest")) == (
        "0.0.0.0",
        "recall.memgrid:50052",
        "127.0.0.1:50051",
    )
    # The deprecated GRPC_HOST is still both, until the new settings say otherwise.
    old = Settings(_env_file=None, grpc_host="10.0.0.5")
    assert (old.listen_host, old.grpc_target("enrich")) == ("10.0.0.5", "10.0.0.5:50053")
    mixed = Settings(_env_file=None, grpc_host="10.0.0.5", grpc_listen_host="0.0.0.0", enrich_addr="e:1")
    assert (mixed.listen_host, mixed.grpc_target("enrich")) == ("0.0.0.0", "e:1")


def test_tls_settings_come_together(tmp_path):
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    with pytest.raises(ValueError, match="GRPC_TLS_CERT_FILE"):
        Settings(_env_file=None, grpc_tls_cert_file=cert)
    with pytest.raises(ValueError, match="GRPC_TLS_CA_FILE"):
        Settings(_env_file=None, grpc_tls_ca_file=cert)
    on = Settings(_env_file=None, grpc_tls_cert_file=cert, grpc_tls_key_file=key, service_claim_key="s" * 32)
    assert ServicePlane.from_settings(on).tls
    assert not ServicePlane.from_settings(Settings(_env_file=None, service_claim_key="s" * 32)).tls


def test_a_previous_key_is_accepted_while_a_rotation_is_under_way():
    old, new = b"o" * 32, b"n" * 32
    rotating = ServicePlane(new, accepted_keys=(old,))
    assert rotating.verify(sign_claim(old, "acme", "read")).tenant == "acme"
    assert rotating.verify(sign_claim(new, "acme", "read")).tenant == "acme"
    assert verify_claim(new, rotating.signer().metadata("acme", "read")[0][1]).tenant == "acme"  # signs with new
    with pytest.raises(ClaimRefused) as refused:
        rotating.verify(sign_claim(b"x" * 32, "acme", "read"))
    assert refused.value.reason == "BAD_SIGNATURE"
    with pytest.raises(ClaimRefused) as expired:
        rotating.verify(sign_claim(old, "acme", "read", ttl=1, now=0))
    assert expired.value.reason == "EXPIRED"
    settings = Settings(_env_file=None, service_claim_key="n" * 32, service_claim_previous_key="o" * 32)
    assert ServicePlane.from_settings(settings).accepted_keys == (old,)
