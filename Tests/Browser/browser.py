"""The headless chromium the browser tests drive (Debian's chromium and chromium-driver, through
selenium), started the same way for each of them."""
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

ARGUMENTS = ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,800",
             "--no-first-run", "--disable-extensions", "--disable-background-networking", "--disable-sync",
             "--disable-component-update", "--metrics-recording-only", "--password-store=basic"]


def chromium(page_load_timeout=20):
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for a in ARGUMENTS:
        options.add_argument(a)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(page_load_timeout)
    return driver
