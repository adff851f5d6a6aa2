"""Sends one push with apns2-up (the PyAPNs2 family, on hyper), as its users do: token auth,
whose JWT carries `iat: time.time()` (a float). pushemu stands in for Apple on localhost.

usage: apns2_send.py PORT CA_FILE KEY_FILE KEY_ID TEAM_ID DEVICE_TOKEN TOPIC
prints "sent" on success, or the error class and reason apns2 raised.
"""
import sys

from hyper.tls import init_context
from apns2.client import APNsClient
from apns2.credentials import TokenCredentials
from apns2.payload import Payload

port, ca, key, key_id, team_id, token, topic = sys.argv[1:8]
APNsClient.SANDBOX_SERVER = "localhost"
APNsClient.DEFAULT_PORT = int(port)
credentials = TokenCredentials(auth_key_path=key, auth_key_id=key_id, team_id=team_id)
# The development CA instead of the system's (the attribute the library keeps its context in).
credentials._Credentials__ssl_context = init_context(cert_path=ca)
client = APNsClient(credentials=credentials, use_sandbox=True)
try:
    client.send_notification(token, Payload(alert="Hello from apns2"), topic)
    print("sent")
except Exception as error:  # the library raises one class per APNs reason
    print(type(error).__name__, getattr(error, "args", ""))
