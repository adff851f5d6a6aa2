"""Spends an APNs connection's error budget with httpx (HTTP/2 over h2c, on Python's h2) and
prints each answer as the client read it: `STATUS BODY`, or `ERROR <exception>`. The last
answer is followed by GOAWAY; a client on h2 reads it only if the DATA came first.

usage: httpx_budget.py PORT COUNT
"""
import sys

import httpx

port, count = int(sys.argv[1]), int(sys.argv[2])
with httpx.Client(http1=False, http2=True, timeout=10) as client:
    for _ in range(count):
        try:
            r = client.post(f"http://127.0.0.1:{port}/3/device/not-hex", headers={"apns-topic": "com.example.app"},
                            content=b'{"aps":{}}')
            print(r.status_code, r.text)
        except Exception as error:
            print("ERROR", type(error).__name__)
            break
