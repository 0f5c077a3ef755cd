package rules

import (
	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/agent"
)

// Device is a client's device class as read from its User-Agent.
type Device uint8

const (
	// DeviceUnknown: a User-Agent that names no device and is no bot's. It
	// matches no devices condition.
	DeviceUnknown Device = iota
	DeviceIOS
	DeviceAndroid
	DeviceDesktop
	DeviceBot
	numDevices
)

// String is the name spec.rules[].devices uses (unknown for DeviceUnknown).
func (d Device) String() string {
	switch d {
	case DeviceIOS:
		return string(linkv1.DeviceIOS)
	case DeviceAndroid:
		return string(linkv1.DeviceAndroid)
	case DeviceDesktop:
		return string(linkv1.DeviceDesktop)
	case DeviceBot:
		return string(linkv1.DeviceBot)
	}
	return "unknown"
}

func parseDevice(c linkv1.DeviceClass) (Device, bool) {
	switch c {
	case linkv1.DeviceIOS:
		return DeviceIOS, true
	case linkv1.DeviceAndroid:
		return DeviceAndroid, true
	case linkv1.DeviceDesktop:
		return DeviceDesktop, true
	case linkv1.DeviceBot:
		return DeviceBot, true
	}
	return DeviceUnknown, false
}

// Classify reads the device class of a User-Agent: DeviceOf its
// agent.Classify, the product's one classifier of clients (its table and
// corpus are internal/agent's). It reads the agent once, a table step per
// byte, and does not allocate.
func Classify(userAgent []byte) Device {
	return DeviceOf(agent.Classify(userAgent))
}

// DeviceOf is the device class of a classified client: DeviceBot for one
// no person drives (agent.Agent.Bot: crawlers, previewers, prefetchers,
// monitors, HTTP libraries, an empty agent), whatever device it names;
// else the class of the platform it names; DeviceUnknown if it names none.
func DeviceOf(a agent.Agent) Device {
	if a.Bot() {
		return DeviceBot
	}
	switch a.Platform() {
	case agent.PlatformIOS:
		return DeviceIOS
	case agent.PlatformAndroid:
		return DeviceAndroid
	case agent.PlatformDesktop:
		return DeviceDesktop
	}
	return DeviceUnknown
}
