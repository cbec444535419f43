"""pipelines.serve's page, used as a person uses it: in Debian's headless Chromium (driven
by its ChromeDriver), type a sentence, press Translate, read the translation, the beam
with scores and the attention map of each decoder block. The run leaves a screenshot in
test-artifacts/serving_page.png."""

import json
import os
import shutil
import tempfile
import urllib.request

import pytest
from helpers.subprocesses import ROOT, free_ports, start_server_with_banner, stop_server

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
SENTENCE = "A man is riding a bicycle."
# Chromium on a machine without a network: no background connections, no sandbox (root).
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1200,1000",
]


@pytest.fixture
def browser():
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.fail("Chromium and ChromeDriver are missing: scripts/run_tests.sh installs them.")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    for flag in CHROMIUM_FLAGS + [f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.mark.slow  # a server and a browser in fresh processes
def test_a_person_translates_on_the_page(exported, browser, fork_server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.wait import WebDriverWait

    (rest_port,) = free_ports(1)
    process, _, banner = start_server_with_banner(
        exported, "tiny", f"--rest_api_port={rest_port}", fork_server=fork_server
    )
    try:
        assert f"REST on 127.0.0.1:{rest_port}" in banner, banner
        url = f"http://127.0.0.1:{rest_port}"
        body = json.dumps({"instances": [SENTENCE]}).encode()
        with urllib.request.urlopen(f"{url}/v1/models/tiny:predict", body, timeout=60) as answer:
            expected = json.loads(answer.read())["predictions"][0]["translation"]
        browser.get(f"{url}/")
        assert browser.find_element(By.TAG_NAME, "h1").text == "tiny"
        browser.find_element(By.ID, "source").send_keys(SENTENCE)
        browser.find_element(By.ID, "translate").click()
        wait = WebDriverWait(browser, 60)
        best = wait.until(
            expected_conditions.visibility_of_element_located((By.CSS_SELECTOR, ".translation"))
        )
        assert best.text == expected.strip()
        assert browser.find_element(By.ID, "error").text == ""
        beam = browser.find_elements(By.CSS_SELECTOR, "table.nbest tr")
        assert len(beam) == 3  # the export's beam, each with its score
        assert all(float(row.find_elements(By.TAG_NAME, "td")[0].text) <= 0 for row in beam)
        captions = [c.text for c in browser.find_elements(By.TAG_NAME, "figcaption")]
        assert captions and all(c.startswith("attention, block ") for c in captions)
        heatmaps = browser.find_elements(By.TAG_NAME, "canvas")
        assert len(heatmaps) == len(captions) and all(c.size["width"] > 0 for c in heatmaps)
        artifacts = os.path.join(ROOT, "test-artifacts")
        os.makedirs(artifacts, exist_ok=True)
        assert browser.save_screenshot(os.path.join(artifacts, "serving_page.png"))
        # With the server gone the page says so instead of showing stale translations.
        stop_server(process)
        browser.find_element(By.ID, "translate").click()
        error = wait.until(lambda driver: driver.find_element(By.ID, "error").text)
        assert error.startswith("The server did not translate: ")
        assert browser.find_elements(By.CSS_SELECTOR, ".translation") == []
    finally:
        stop_server(process)
