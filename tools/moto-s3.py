#!/usr/bin/env python3
"""moto's S3 server on loopback with authentication enforced, for tilepack's s3:// tests.

  moto-s3.py serve PORT META_PORT PROXY_PORT
      Starts moto on 127.0.0.1:PORT, creates an IAM user with an S3 policy, its access key, a
      role and session credentials of that role (STS AssumeRole), the bucket `tiles`, then
      enforces authentication (every later request must be signed with a known key: moto checks
      the signature with botocore). On META_PORT it serves what the credential chain asks, each
      answering the role's session credentials: STS AssumeRoleWithWebIdentity (GET /?Action=...,
      the token must be `web-identity-token`), container credentials (GET /container, header
      `Authorization: container-token`) and IMDSv2 (PUT /latest/api/token, then
      /latest/meta-data/iam/security-credentials/[role]). On PROXY_PORT a fault-injecting proxy
      stands in front of moto (see fault_proxy). Prints one JSON line with the keys,
      then runs until its standard input closes (the test process ends), and stops.

  moto-s3.py sign
      Reads a request as JSON on standard input ({method, url, headers, access, secret, token,
      region}; headers hold X-Amz-Date and X-Amz-Content-SHA256) and prints botocore's
      S3SigV4Auth canonical request, string to sign and signature for it, as JSON.
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


def sign():
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    spec = json.load(sys.stdin)
    auth = S3SigV4Auth(Credentials(spec["access"], spec["secret"], spec.get("token")), "s3", spec["region"])
    request = AWSRequest(method=spec["method"], url=spec["url"], headers=spec["headers"], data=b"")
    request.context["timestamp"] = spec["headers"]["X-Amz-Date"]
    canonical = auth.canonical_request(request)
    string_to_sign = auth.string_to_sign(request, canonical)
    print(json.dumps({"canonical": canonical, "stringToSign": string_to_sign, "signature": auth.signature(string_to_sign, request)}))


def check_signatures_on_the_request_as_sent():
    """moto checks a signature against the URL as werkzeug re-quotes it, which decodes a `%2F` in
    the query to `/` (so a signed ListObjectsV2 with `prefix=a%2F` is refused, botocore's own
    included); S3 checks the query as sent. Here moto checks the request line as it arrived."""
    from moto.core.authorization import ActionAuthenticatorMixin
    from moto.core.responses import BaseResponse

    setup = BaseResponse.setup_class

    def setup_class(self, request, full_url, headers, *args, **kwargs):
        setup(self, request, full_url, headers, *args, **kwargs)
        raw = getattr(request, "environ", {}).get("RAW_URI") if self.is_werkzeug_request else None
        self._tilepack_raw_uri = raw

    authenticate = ActionAuthenticatorMixin._authenticate_and_authorize_action

    def authenticate_as_sent(self, iam_request_cls, resource="*"):
        raw = getattr(self, "_tilepack_raw_uri", None)
        if raw:
            uri = self.uri
            self.uri = "http://moto" + raw
            try:
                return authenticate(self, iam_request_cls, resource)
            finally:
                self.uri = uri
        return authenticate(self, iam_request_cls, resource)

    BaseResponse.setup_class = setup_class
    ActionAuthenticatorMixin._authenticate_and_authorize_action = authenticate_as_sent


def fault_proxy(upstream):
    """A proxy in front of moto that passes requests on byte for byte (the Host header kept, so
    signatures still hold) unless a fault set with `POST /_fault` matches the request line:
    {"match": "PUT /tiles/k?partNumber=2", "fault": KIND, "times": N}, KIND one of
      slowdown   503 SlowDown with Retry-After: 1;
      drop       half the request body read, then the connection closed without an answer;
      signature  403 SignatureDoesNotMatch;
      skew       403 RequestTimeTooSkewed with a Date 20 minutes ahead.
    `GET /_fault` answers how many faults were injected."""
    import http.client
    import email.utils
    import time as clock

    faults = []
    injected = [0]
    lock = threading.Lock()

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def answer(self, status, body, headers=()):
            data = body.encode()
            self.send_response_only(status)
            if not any(name == "Date" for name, _ in headers):
                self.send_header("Date", self.date_time_string())
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def error(self, status, code, message, headers=()):
            self.answer(status, f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{message}</Message></Error>",
                        [("Content-Type", "application/xml")] + list(headers))

        def handle_any(self):
            length = int(self.headers.get("Content-Length") or 0)
            if self.path == "/_fault":
                if self.command == "POST":
                    with lock:
                        faults.append(json.loads(self.rfile.read(length)))
                    return self.answer(200, "{}")
                with lock:
                    return self.answer(200, json.dumps({"injected": injected[0]}))
            line = f"{self.command} {self.path}"
            fault = None
            with lock:
                for candidate in faults:
                    if candidate["times"] > 0 and candidate["match"] in line:
                        candidate["times"] -= 1
                        injected[0] += 1
                        fault = candidate["fault"]
                        break
            if fault == "drop":
                self.rfile.read(length // 2)
                self.close_connection = True
                return
            body = self.rfile.read(length) if length else b""
            if fault == "slowdown":
                return self.error(503, "SlowDown", "Please reduce your request rate.", [("Retry-After", "1")])
            if fault == "signature":
                return self.error(403, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided.")
            if fault == "skew":
                ahead = email.utils.formatdate(clock.time() + 1200, usegmt=True)
                return self.error(403, "RequestTimeTooSkewed", "The difference between the request time and the current time is too large.",
                                  [("Date", ahead)])
            connection = http.client.HTTPConnection("127.0.0.1", upstream, timeout=60)
            connection.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                connection.putheader(name, value)
            connection.endheaders(body)
            response = connection.getresponse()
            data = response.read()
            self.send_response(response.status)
            for name, value in response.getheaders():
                if name.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                    self.send_header(name, value)
            # A HEAD answer has no body but the length a GET would send: moto's, passed on.
            length = response.getheader("Content-Length") if self.command == "HEAD" else None
            self.send_header("Content-Length", length or str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            connection.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any

    return Proxy


def serve(port, meta_port, proxy_port):
    import boto3
    import requests
    from moto.server import ThreadedMotoServer

    check_signatures_on_the_request_as_sent()

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    session = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="setup", aws_secret_access_key="setup")
    iam = boto3.client("iam", **session)
    policy = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]})
    iam.create_user(UserName="tilepack")
    iam.put_user_policy(UserName="tilepack", PolicyName="s3", PolicyDocument=policy)
    key = iam.create_access_key(UserName="tilepack")["AccessKey"]
    iam.create_user(UserName="nobody")
    denied = iam.create_access_key(UserName="nobody")["AccessKey"]
    trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]})
    role = iam.create_role(RoleName="tiles-reader", AssumeRolePolicyDocument=trust)["Role"]
    iam.put_role_policy(RoleName="tiles-reader", PolicyName="s3", PolicyDocument=policy)
    assumed = boto3.client("sts", **session).assume_role(RoleArn=role["Arn"], RoleSessionName="tests", DurationSeconds=3600)["Credentials"]
    boto3.client("s3", **session).create_bucket(Bucket="tiles")
    requests.post(f"{endpoint}/moto-api/reset-auth", data=b"0").raise_for_status()

    expiration = assumed["Expiration"].strftime("%Y-%m-%dT%H:%M:%SZ")
    answer = {"AccessKeyId": assumed["AccessKeyId"], "SecretAccessKey": assumed["SecretAccessKey"], "Token": assumed["SessionToken"],
              "Expiration": expiration}

    class Meta(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def reply(self, status, body, kind="application/json"):
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_PUT(self):
            if self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                return self.reply(200, "imds-token", "text/plain")
            self.reply(400, "bad token request")

        def do_GET(self):
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            if parts.path == "/" and query.get("Action") == ["AssumeRoleWithWebIdentity"]:
                if query.get("WebIdentityToken") != ["web-identity-token"] or query.get("RoleArn") != [role["Arn"]]:
                    return self.reply(403, "<ErrorResponse><Error><Code>InvalidIdentityToken</Code><Message>bad token</Message></Error></ErrorResponse>", "text/xml")
                xml = ("<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>"
                       f"<AccessKeyId>{answer['AccessKeyId']}</AccessKeyId><SecretAccessKey>{answer['SecretAccessKey']}</SecretAccessKey>"
                       f"<SessionToken>{answer['Token']}</SessionToken><Expiration>{expiration}</Expiration>"
                       "</Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>")
                return self.reply(200, xml, "text/xml")
            if parts.path == "/container":
                if self.headers.get("Authorization") != "container-token":
                    return self.reply(401, "{}")
                return self.reply(200, json.dumps(answer))
            if parts.path.startswith("/latest/meta-data/iam/security-credentials/"):
                if self.headers.get("X-aws-ec2-metadata-token") != "imds-token":
                    return self.reply(401, "")
                name = parts.path.rsplit("/", 1)[1]
                return self.reply(200, "tiles-reader", "text/plain") if name == "" else self.reply(200, json.dumps(answer))
            self.reply(404, "{}")

    meta = ThreadingHTTPServer(("127.0.0.1", meta_port), Meta)
    threading.Thread(target=meta.serve_forever, daemon=True).start()
    proxy = ThreadingHTTPServer(("127.0.0.1", proxy_port), fault_proxy(port))
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    print(json.dumps({"port": port, "metaPort": meta_port, "proxyPort": proxy_port, "accessKeyId": key["AccessKeyId"], "secretAccessKey": key["SecretAccessKey"],
                      "deniedAccessKeyId": denied["AccessKeyId"], "deniedSecretAccessKey": denied["SecretAccessKey"],
                      "roleArn": role["Arn"], "session": answer}), flush=True)
    sys.stdin.read()
    meta.shutdown()
    proxy.shutdown()
    server.stop()


if __name__ == "__main__":
    if sys.argv[1] == "sign":
        sign()
    else:
        serve(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
