"""Holds Herald's Web Push wire to implementations nobody here wrote: http_ece, py_vapid, pywebpush.

Usage: webpush_check.py CASES_JSON

CASES_JSON holds
- "swift_made": bodies and VAPID headers Herald's Swift code made, with the browser's private
  key and auth secret: http_ece must decrypt each body to its plaintext, py_vapid must verify
  each header, and its claims must say what Herald meant (aud, sub, exp within 24 hours);
- "emulator": subscriptions Herald's emulator issued, a VAPID key file, a subject, a CA file:
  pywebpush encrypts each payload and pushes it to the emulator, which must answer 201 (the
  Swift test then reads what the emulator decrypted).

Prints one "ok: ..." line per check and exits 0 when every check passed, 1 otherwise.
"""

import base64
import json
import sys
import time

import http_ece
import py_vapid
import pywebpush
import requests
from cryptography.hazmat.primitives.asymmetric import ec

failures = []


def check(name, condition, detail=""):
    if condition:
        print(f"ok: {name}")
    else:
        print(f"FAILED: {name} {detail}")
        failures.append(name)


def b64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def main():
    with open(sys.argv[1]) as handle:
        cases = json.load(handle)

    for index, case in enumerate(cases["swift_made"]):
        name = f"swift body {index} ({len(case['plaintext'])} bytes)"
        private_key = ec.derive_private_key(int.from_bytes(b64url(case["private_key"]), "big"), ec.SECP256R1())
        try:
            plaintext = http_ece.decrypt(b64url(case["body"]), private_key=private_key,
                                         auth_secret=b64url(case["auth"]), version="aes128gcm")
            check(f"http_ece decrypts {name}", plaintext == case["plaintext"].encode("utf-8"),
                  f"got {plaintext[:60]!r}")
        except Exception as error:  # noqa: BLE001 - any failure is the finding
            check(f"http_ece decrypts {name}", False, repr(error))

        authorization = case["authorization"]
        # RFC 8292 writes "t=..., k=..."; py_vapid's parser splits the header at its last
        # space, so it reads only the comma form it writes itself.
        compact = authorization.replace(", k=", ",k=")
        try:
            check(f"py_vapid verifies the VAPID header of {name}", py_vapid.Vapid02.verify(compact) is True)
        except Exception as error:  # noqa: BLE001
            check(f"py_vapid verifies the VAPID header of {name}", False, repr(error))
        token = authorization.split("t=", 1)[1].split(",", 1)[0]
        header = json.loads(b64url(token.split(".")[0]))
        claims = json.loads(b64url(token.split(".")[1]))
        check(f"the JWT header of {name} is ES256", header == {"typ": "JWT", "alg": "ES256"}, str(header))
        check(f"aud of {name} is the endpoint's origin", claims.get("aud") == case["audience"], str(claims))
        check(f"sub of {name} is the subject", claims.get("sub") == case["subject"], str(claims))
        ahead = claims.get("exp", 0) - time.time()
        check(f"exp of {name} is ahead and within 24 hours", 0 < ahead <= 86400, f"{ahead} s")

    emulator = cases["emulator"]
    session = requests.Session()
    # requests lets REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE from the environment override a
    # session's own CA file; the emulator's self-signed certificate is the only one to trust.
    session.trust_env = False
    session.verify = emulator["ca_file"]
    for index, push in enumerate(emulator["pushes"]):
        try:
            response = pywebpush.webpush(subscription_info=push["subscription"], data=push["payload"],
                                         vapid_private_key=emulator["vapid_pem"],
                                         vapid_claims={"sub": emulator["subject"]}, ttl=120,
                                         requests_session=session)
            check(f"pywebpush push {index} accepted by the emulator", response.status_code == 201,
                  f"{response.status_code} {response.text}")
        except pywebpush.WebPushException as error:
            check(f"pywebpush push {index} accepted by the emulator", False, str(error))

    if failures:
        print(f"{len(failures)} webpush checks failed")
        sys.exit(1)
    print("all webpush checks passed")


if __name__ == "__main__":
    main()
