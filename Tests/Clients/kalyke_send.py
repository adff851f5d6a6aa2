#!/usr/bin/env python3
"""kalyke-apns 1.5.0 (PyPI), unchanged: it signs its provider token with `"iat"` as a string of
digits and posts to the real api.sandbox.push.apple.com over HTTP/2 (httpx2), reached here
through pushemu's proxy (`pushemu env`).

usage: kalyke_send.py KEY_FILE KEY_ID TEAM_ID TOKEN
Prints the apns-id of each send, or the exception's class and reason.
"""
import asyncio, sys

from kalyke import ApnsClient, ApnsConfig, Payload, PayloadAlert
from kalyke.exceptions import ApnsProviderException

key_file, key_id, team_id, token = sys.argv[1:5]


async def main():
    client = ApnsClient(use_sandbox=True, team_id=team_id, auth_key_id=key_id, auth_key_filepath=key_file)
    config = ApnsConfig(topic="com.example.app")
    print("sent", await client.send_message(device_token=token, payload=Payload(alert=PayloadAlert(title="Hi", body="kalyke")),
                                            apns_config=config))
    try:
        await client.send_message(device_token="not-a-token", payload=Payload(alert="x"), apns_config=config)
        print("bad token sent")
    except ApnsProviderException as e:
        print("refused", type(e).__name__)


asyncio.run(main())
