package headless

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
)

// Load is DumpDOM for tests: it skips when chromium is missing (fails
// under CI=true, whose .ci/run installs it) and fails on any console
// message, on errors the page caught, or when its script did not finish.
func Load(t testing.TB, path string) string {
	t.Helper()
	dom, log, err := DumpDOM(path)
	if errors.Is(err, ErrNoChromium) {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but chromium is not installed (.ci/run installs it)")
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "CONSOLE") || strings.Contains(l, "Uncaught") {
			t.Errorf("console: %s", l)
		}
	}
	if strings.Contains(dom, "data-errors") {
		t.Errorf("the page caught errors:\n%s", regexp.MustCompile(`(?s)<div id="errors">.*?</div>`).FindString(dom))
	}
	if !strings.Contains(dom, `data-ready="1"`) {
		t.Errorf("the page's script did not finish")
	}
	return dom
}
