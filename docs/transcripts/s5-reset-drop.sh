# docs/s5-idle-timeout.md: the lab's payload timer ending flows with a RST, then silently.
. docs/transcripts/lib.sh
tpslab probe idle --lab-idle-timeout 2500ms --lab-on-idle reset --lab-timer payload --min 1s --max 5s --resolution 1s --connections 8 2>/dev/null
tpslab probe idle --lab-idle-timeout 2500ms --lab-on-idle drop --lab-timer payload --min 1s --max 5s --resolution 1s --connections 8 2>/dev/null
