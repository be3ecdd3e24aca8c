// Package krew holds the krew plugin manifest template (crdver.yaml) that krew-release-bot
// renders on each release; its tests check it against krew's manifest rules and against the
// archives .goreleaser.yaml builds. There is no Go code to import here.
package krew
