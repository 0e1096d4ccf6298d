package report

import (
	"os"
	"testing"
)

func TestPeek(t *testing.T) {
	WriteText(os.Stdout, periodicSnapshot(), fixtureSymbols, Options{Top: 10})
	os.Stdout.WriteString("-----\n")
	WriteText(os.Stdout, periodicSnapshot(), fixtureSymbols, Options{Top: 2, Final: true, Raw: true, Sort: SortAllocs})
	os.Stdout.WriteString("-----\n")
	WriteJSON(os.Stdout, periodicSnapshot(), fixtureSymbols, Options{Top: 10})
}
