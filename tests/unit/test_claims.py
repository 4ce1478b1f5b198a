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
from services.core.settings import PlaneSettings, Settings

KEY = b"k" * 32
NOW = 1_800_000_000.0
#: The service every claim here is for.
AUD = "recall"


def reason(token, *, key=KEY, now=NOW, skew=5.0) -> str:
    with pytest.raises(ClaimRefused) as refused:
        verify_claim(key, token, now=now, skew=skew, audience=AUD)
    return refused.value.reason


def test_a_signed_claim_verifies_with_every_field():
    token = sign_claim(KEY, "acme", "write", 10, "tok-1", ttl=60, now=NOW, audience=AUD)
    assert verify_claim(KEY, token, now=NOW + 30, audience=AUD) == Claim("acme", "write", 10, "tok-1", NOW + 60, (AUD,))
    bare = verify_claim(KEY, sign_claim(KEY, None, "operator", now=NOW, audience=AUD), now=NOW, audience=AUD)
    assert (bare.tenant, bare.memory_limit, bare.actor, bare.operator) == (None, None, None, True)


def test_an_expired_claim_is_refused_past_the_skew_allowance():
    token = sign_claim(KEY, "acme", "read", ttl=60, now=NOW, audience=AUD)
    assert verify_claim(KEY, token, now=NOW + 64, skew=5, audience=AUD).tenant == "acme"  # within the allowance
    assert reason(token, now=NOW + 66, skew=5) == "EXPIRED"
    assert reason(token, now=NOW + 61, skew=0) == "EXPIRED"


def test_another_key_or_a_changed_payload_is_a_bad_signature():
    token = sign_claim(KEY, "acme", "read", now=NOW, audience=AUD)
    assert reason(token, key=b"x" * 32) == "BAD_SIGNATURE"
    payload, mac = token.split(".")
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    for change in ({"t": "other"}, {"r": "admin"}, {"m": 10**9}, {"e": NOW + 10**6}):
        forged = base64.urlsafe_b64encode(json.dumps({**body, **change}).encode()).rstrip(b"=").decode()
        assert reason(f"{forged}.{mac}") == "BAD_SIGNATURE"
    # Leaving the memory limit out cannot lift it: the payload without "m" is another payload.
    limited = sign_claim(KEY, "acme", "write", 5, now=NOW, audience=AUD)
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
    [(name, token)] = ClaimSigner(KEY, 30, "system:enrich", AUD).metadata("acme", "read")
    assert name == "x-memgrid-claim"
    claim = verify_claim(KEY, token, audience=AUD)
    assert (claim.tenant, claim.role, claim.actor) == ("acme", "read", "system:enrich")


def test_the_key_file_is_made_once_readable_by_its_owner_only(tmp_path):
    key = load_or_create_claim_key(tmp_path)
    path = tmp_path / CLAIM_KEY_FILE_NAME
    assert len(key) >= 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_claim_key(tmp_path) == key
    assert load_or_create_claim_key(tmp_path / "other") != key
    # SERVICE_CLAIM_KEY wins over the file.
    settings = Settings(_env_file=None, memgrid_data_dir=tmp_path, service_claim_key="s" * 40)
    assert ServicePlane.from_settings(settings.plane, settings.process.memgrid_data_dir).key == b"s" * 40
    assert ServicePlane.from_settings(PlaneSettings(_env_file=None), tmp_path).key == key


def test_listening_and_dialling_are_separate_settings():
    plain = Settings(_env_file=None)
    assert (plain.plane.listen_host, plain.plane.grpc_target("recall")) == ("127.0.0.1", "127.0.0.1:50052")
    pod = Settings(_env_file=None, grpc_listen_host="0.0.0.0", recall_addr="recall.memgrid:50052")
    assert (pod.plane.listen_host, pod.plane.grpc_target("recall"), pod.plane.grpc_target("ingest")) == (
        "0.0.0.0",
        "recall.memgrid:50052",
        "127.0.0.1:50051",
    )
    # The deprecated GRPC_HOST is still both, until the new settings say otherwise.
    old = Settings(_env_file=None, grpc_host="10.0.0.5")
    assert (old.plane.listen_host, old.plane.grpc_target("enrich")) == ("10.0.0.5", "10.0.0.5:50053")
    mixed = Settings(_env_file=None, grpc_host="10.0.0.5", grpc_listen_host="0.0.0.0", enrich_addr="e:1")
    assert (mixed.plane.listen_host, mixed.plane.grpc_target("enrich")) == ("0.0.0.0", "e:1")


def test_tls_settings_come_together(tmp_path):
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    with pytest.raises(ValueError, match="GRPC_TLS_CERT_FILE"):
        Settings(_env_file=None, grpc_tls_cert_file=cert)
    with pytest.raises(ValueError, match="GRPC_TLS_CA_FILE"):
        Settings(_env_file=None, grpc_tls_ca_file=cert)
    on = Settings(_env_file=None, grpc_tls_cert_file=cert, grpc_tls_key_file=key, service_claim_key="s" * 32)
    assert ServicePlane.from_settings(on.plane, on.process.memgrid_data_dir).tls
    assert not ServicePlane.from_settings(PlaneSettings(_env_file=None, service_claim_key="s" * 32), tmp_path).tls


def test_a_previous_key_is_accepted_while_a_rotation_is_under_way():
    old, new = b"o" * 32, b"n" * 32
    rotating = ServicePlane(new, accepted_keys=(old,))
    assert rotating.verify(sign_claim(old, "acme", "read", audience=AUD), AUD).tenant == "acme"
    assert rotating.verify(sign_claim(new, "acme", "read", audience=AUD), AUD).tenant == "acme"
    assert (
        verify_claim(new, rotating.signer(audience=AUD).metadata("acme", "read")[0][1], audience=AUD).tenant == "acme"
    )  # signs with new
    with pytest.raises(ClaimRefused) as refused:
        rotating.verify(sign_claim(b"x" * 32, "acme", "read", audience=AUD), AUD)
    assert refused.value.reason == "BAD_SIGNATURE"
    with pytest.raises(ClaimRefused) as expired:
        rotating.verify(sign_claim(old, "acme", "read", ttl=1, now=0, audience=AUD), AUD)
    assert expired.value.reason == "EXPIRED"
    settings = Settings(_env_file=None, service_claim_key="n" * 32, service_claim_previous_key="o" * 32)
    assert ServicePlane.from_settings(settings.plane, settings.process.memgrid_data_dir).accepted_keys == (old,)


def test_a_claim_is_refused_by_a_service_it_was_not_made_for():
    token = sign_claim(KEY, "acme", "admin", now=NOW, audience="recall")
    assert verify_claim(KEY, token, now=NOW, audience="recall").audience == ("recall",)
    with pytest.raises(ClaimRefused) as refused:
        verify_claim(KEY, token, now=NOW, audience="ingest")
    assert refused.value.reason == "WRONG_AUDIENCE"
    # Several services may be named (the tests' helper signs for all); the audience cannot be changed after.
    both = sign_claim(KEY, "acme", "read", now=NOW, audience=("recall", "enrich"))
    assert verify_claim(KEY, both, now=NOW, audience="enrich").tenant == "acme"
    payload, mac = token.split(".")
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    widened = base64.urlsafe_b64encode(json.dumps({**body, "s": ["recall", "ingest"]}).encode()).rstrip(b"=").decode()
    assert reason(f"{widened}.{mac}") == "BAD_SIGNATURE"


def test_a_claim_naming_no_service_is_refused_and_none_is_signed():
    from services.core.grpc.claims import _b64, _mac

    payload = _b64(b'{"t":"acme","r":"admin","e":1900000000}')  # as claims were signed before they named one
    assert reason(f"{payload}.{_mac(KEY, payload)}") == "WRONG_AUDIENCE"
    for audience in ("", (), ("recall", "")):
        with pytest.raises(ValueError):
            sign_claim(KEY, "acme", "read", audience=audience)
    with pytest.raises(ValueError):
        ClaimSigner(KEY).metadata("acme", "read")  # a signer that names no service signs nothing


@pytest.mark.parametrize(
    ("role", "allowed"),
    [
        ("read", {"read"}),
        ("admin", {"read", "write", "review", "admin"}),
        ("operator", {"read", "write", "review", "admin", "operator"}),
        ("root", set()),
    ],
)
def test_a_claim_s_role_includes_the_ones_before_it(role, allowed):
    claim = Claim("acme", role)
    assert {r for r in ("read", "write", "review", "admin", "operator") if claim.allows(r)} == allowed
    assert claim.operator is (role == "operator")
