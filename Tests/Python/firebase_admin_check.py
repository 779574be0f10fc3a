"""Drives the Herald FCM emulator with the official firebase-admin Python SDK.

Usage: firebase_admin_check.py SERVICE_ACCOUNT_FILE EMULATOR_BASE_URL TOKEN_LIFETIME_SECONDS

The service account's token_uri already points at the emulator; FCM_URL is redirected to it.
Prints one "ok: ..." line per check and exits 0 when every check passed, 1 otherwise.
"""

import json
import sys
import time
import urllib.error
import urllib.request
import warnings

import firebase_admin
from firebase_admin import credentials, exceptions, messaging

# Message.token is deprecated in favour of fid in recent SDKs; FCM (and the emulator) take both.
warnings.filterwarnings("ignore", category=DeprecationWarning)

failures = []


def check(name, condition, detail=""):
    if condition:
        print(f"ok: {name}")
    else:
        print(f"FAILED: {name} {detail}")
        failures.append(name)


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def expect_error(name, token, error_type):
    try:
        messaging.send(messaging.Message(token=token, data={"check": name}))
    except error_type as error:
        check(f"{name} raises {error_type.__name__}", True)
        return error
    except Exception as error:  # noqa: BLE001 - the report names what came instead
        check(f"{name} raises {error_type.__name__}", False, f"got {type(error).__name__}: {error}")
        return None
    check(f"{name} raises {error_type.__name__}", False, "but the send succeeded")
    return None


def main():
    account_file, base_url, lifetime = sys.argv[1], sys.argv[2].rstrip("/"), float(sys.argv[3])
    with open(account_file, encoding="utf-8") as f:
        project_id = json.load(f)["project_id"]

    # The SDK formats this template with the project ID when the messaging service is created.
    messaging._MessagingService.FCM_URL = base_url + "/v1/projects/{0}/messages:send"
    app = firebase_admin.initialize_app(credentials.Certificate(account_file))

    issued_before = get_json(base_url + "/emulator/stats")["tokens_issued"]
    name = messaging.send(messaging.Message(token="python-good-token", data={"greeting": "hello"},
                                            android=messaging.AndroidConfig(ttl=3600, priority="high")))
    check("a good token returns the message name", name.startswith(f"projects/{project_id}/messages/"), name)

    delivered = get_json(base_url + "/emulator/messages?token=python-good-token")["messages"]
    check("the emulator recorded the message as sent",
          len(delivered) == 1 and delivered[0]["name"] == name
          and delivered[0]["message"]["data"] == {"greeting": "hello"}
          and delivered[0]["message"]["android"]["ttl"] == "3600s", json.dumps(delivered))

    dry = messaging.send(messaging.Message(topic="news", notification=messaging.Notification(title="t", body="b")),
                         dry_run=True)
    check("a dry run (validate_only) answers a name", dry.startswith(f"projects/{project_id}/messages/"), dry)

    expect_error("fail-unregistered", "fail-unregistered-python", messaging.UnregisteredError)
    expect_error("fail-invalid", "fail-invalid-python", exceptions.InvalidArgumentError)
    expect_error("fail-mismatch", "fail-mismatch-python", messaging.SenderIdMismatchError)
    expect_error("fail-quota", "fail-quota-python", messaging.QuotaExceededError)
    expect_error("fail-auth", "fail-auth-python", messaging.ThirdPartyAuthError)

    # urllib3 (under the SDK) honours Retry-After on a 429: the one-shot quota fault gets through,
    # and the emulator saw no request before the Retry-After had passed.
    started = time.time()
    name = messaging.send(messaging.Message(token="fail-quota-1-python"))
    waited = time.time() - started
    check("the SDK waits out Retry-After: 1 and gets through fail-quota-1", name.startswith("projects/") and waited >= 1.0,
          f"{name} after {waited:.2f}s")
    violations = get_json(base_url + "/emulator/stats")["retry_after_violations"]["count"]
    check("no Retry-After violation recorded for the SDK", violations == 0, f"{violations} violation(s)")

    # The SDK retries 500 and 503 itself (urllib3 Retry, status_forcelist [500, 503]).
    name = messaging.send(messaging.Message(token="fail-internal-2-python"))
    check("the SDK's own retries get through fail-internal-2", name.startswith("projects/"), name)

    # An invalid field, rejected by the emulator's validator rather than the SDK's.
    try:
        messaging.send(messaging.Message(token="python-good-token",
                                         apns=messaging.APNSConfig(headers={"apns-priority": "7"})))
        check("a bad apns-priority raises InvalidArgumentError", False, "but the send succeeded")
    except exceptions.InvalidArgumentError as error:
        check("a bad apns-priority raises InvalidArgumentError", "apns-priority" in str(error), str(error))

    # Token renewal: the first access token expires `lifetime` seconds after it was issued. Wait
    # until that instant has certainly passed, then send again: the SDK must get a new token.
    credential = app.credential.get_credential()
    first_token = credential.token
    deadline = time.time() + lifetime + 0.5
    while time.time() < deadline:
        time.sleep(0.1)
    request = urllib.request.Request(base_url + f"/v1/projects/{project_id}/messages:send", method="POST",
                                     data=json.dumps({"message": {"token": "raw"}}).encode(),
                                     headers={"Authorization": f"Bearer {first_token}",
                                              "Content-Type": "application/json"})
    try:
        urllib.request.urlopen(request, timeout=10)
        check("the emulator refuses the expired access token", False, "it was accepted")
    except urllib.error.HTTPError as error:
        body = json.loads(error.read())
        check("the emulator refuses the expired access token",
              error.code == 401 and body["error"]["status"] == "UNAUTHENTICATED", json.dumps(body))

    name = messaging.send(messaging.Message(token="python-after-expiry"))
    check("a send after the token expired succeeds", name.startswith("projects/"), name)
    issued_after = get_json(base_url + "/emulator/stats")["tokens_issued"]
    check("the emulator issued a second access token", issued_after - issued_before >= 2,
          f"issued before {issued_before}, after {issued_after}")
    check("the SDK now holds a different token", credential.token != first_token)

    firebase_admin.delete_app(app)
    if failures:
        print(f"{len(failures)} check(s) failed: {', '.join(failures)}")
        return 1
    print("all firebase-admin checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
