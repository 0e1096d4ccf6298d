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
	return check(t, func() (string, string, error) { return DumpDOM(path) })
}

// LoadSize is Load in a window of width x height CSS pixels.
func LoadSize(t testing.TB, path string, width, height int) string {
	t.Helper()
	return check(t, func() (string, string, error) { return DumpDOMSize(path, width, height) })
}

func check(t testing.TB, dump func() (dom, log string, err error)) string {
	t.Helper()
	dom, log, err := dump()
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
