package main

import "io"

func runDiff(args []string, stdout, stderr io.Writer) int { return exitUsage }
