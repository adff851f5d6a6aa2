"""django-push-notifications (PyPI, unchanged) sending Web Push through pushemu's proxy: the
subscriptions' endpoints name the real push services, which `pushemu env` routes to pushemu.

    webpush_django.py VAPID_PEM SUBSCRIPTIONS_JSON

SUBSCRIPTIONS_JSON: [{"browser": "CHROME", "subscription": {...}, "token": ...}, ...]. Prints one
JSON object: each device's result, then the result after the subscription was deleted.
"""
import json, sys, urllib.request

import django
from django.conf import settings

pem, subs, base = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
settings.configure(
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "push_notifications"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    PUSH_NOTIFICATIONS_SETTINGS={"WP_PRIVATE_KEY": pem, "WP_CLAIMS": {"sub": "mailto:ops@shop.example"}},
    USE_TZ=True, DEFAULT_AUTO_FIELD="django.db.models.AutoField")
django.setup()
from django.core.management import call_command  # noqa: E402

call_command("migrate", verbosity=0, run_syncdb=True)
from push_notifications.models import WebPushDevice  # noqa: E402

out = {"sent": [], "gone": None}
devices = []
for s in subs:
    d = WebPushDevice.objects.create(registration_id=s["subscription"]["endpoint"], p256dh=s["subscription"]["keys"]["p256dh"],
                                     auth=s["subscription"]["keys"]["auth"], browser=s["browser"])
    devices.append(d)
    r = d.send_message(json.dumps({"title": "From Django", "body": s["browser"]}), ttl=60)
    out["sent"].append({"browser": s["browser"], "result": r})
# The first browser unsubscribed at the service: the library deactivates its device on the 410.
urllib.request.urlopen(urllib.request.Request(base + "/emulator/v1/devices/" + subs[0]["token"], method="DELETE"), timeout=10).read()
r = devices[0].send_message(json.dumps({"title": "again"}), ttl=60)
devices[0].refresh_from_db()
out["gone"] = {"result": r, "active": devices[0].active}
print(json.dumps(out, default=str))
