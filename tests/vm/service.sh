# scx_sky as a systemd service, in a guest whose PID 1 is Debian's systemd
# (`cargo xtask vm --systemd`) with the system bus, polkitd and the
# journal, and scx_sky installed by `cargo xtask install --prefix /usr`:
# - the installed unit starts /usr/bin/scx_sky with the options and the
#   environment of /etc/default/scx_sky, a site policy found by name in
#   /etc/scx_sky/policies/;
# - under the unit's hardening, perf events (`--pmu software` charges
#   counts), pidfds (each task's wait p99 in `top`, a shared space's
#   members proven and kept as one gang) and the sockets (control in the
#   RuntimeDirectory, statistics, the system bus) still work;
# - `systemctl reload` re-reads the edited site policy and switches live;
# - `nobody` asks the bus to switch: polkitd refuses (no session: the
#   action wants an administrator), then a polkit rule allows it;
# - the journal stays quiet; a killed scheduler is restarted by the unit;
#   `systemctl stop` detaches and removes the runtime directory;
# - with RestrictSUIDSGID=yes added (its filter refuses openat2, which
#   opens spaces safely) the scheduler says so once.
. ./lib.sh
n=$(nproc)
echo "check pid1=$(cat /proc/1/comm)"

mkdir -p /etc/scx_sky/policies
sed -e 's/^name = .*/name = "site"/' -e 's/^starve_ms = .*/starve_ms = 45/' \
	/usr/share/scx_sky/policies/sky1.toml >/etc/scx_sky/policies/site.toml
cat >/etc/default/scx_sky <<EOF
SCX_SKY_FLAGS="--policy site --pmu software --class mb-a=memory-bound"
SCX_TIMEOUT_MS=$SCX_TIMEOUT_MS
EOF

# A shared space of two member processes (memory-bound by their name's
# class: a gang with a home), started before the service as on a running
# machine, and a compute task per CPU once it runs (with them all running
# the BPF load alone took 13-25 s under TCG). They outlive every check
# (killed once those are done).
load=
scx_sky pvas create svc --members 2 --segment-mb 2 >/dev/null || echo "check space_created=0"
named_work /tmp/gang-bin mb-a
scx_sky pvas run svc --id 1 -- /tmp/gang-bin/mb-a gang --threads 1 --mb 4 --seconds 900 >/dev/null &
load="$load $!"
scx_sky pvas run svc --id 2 -- /tmp/gang-bin/mb-a gang --threads 1 --mb 4 --seconds 900 >/dev/null &
load="$load $!"

systemctl start scx_sky
echo "check start_exit=$?"
SKY_STATE_WAIT_S=300 wait_state enabled || systemctl status --no-pager scx_sky
pid=$(systemctl show -p MainPID --value scx_sky)
SKY_PID=$pid
i=0
while [ "$i" -lt "$n" ]; do
	sky-work compute --kind idiv --seconds 900 >/dev/null &
	load="$load $!"
	i=$((i + 1))
done
echo "check main_exe=$(readlink "/proc/$pid/exe")"
echo "check env_timeout=$(tr '\0' '\n' <"/proc/$pid/environ" | grep -c "^SCX_TIMEOUT_MS=$SCX_TIMEOUT_MS\$")"
echo "check no_new_privs=$(sed -n 's/^NoNewPrivs:[[:space:]]*//p' "/proc/$pid/status")"
echo "check ops=$(cat /sys/kernel/sched_ext/root/ops)"
echo "check runtime_dir_mode=$(stat -c %a /run/scx_sky)"
echo "check runtime_dir_owner=$(stat -c %U /run/scx_sky)"
[ -S /run/scx_sky/control.sock ] && echo "check control_socket=1"
scx_sky policy get >/tmp/get.out
echo "check policy=$(policy_name)"
echo "check starve_ms=$(sed -n 's/^starve_ms = //p' /tmp/get.out)"

# Until the daemon has charged counts (a period or two), at most 60 s.
pmu_charges() {
	sky_query stats --json >/tmp/stats.json
	sed -n 's/.*"pmu_charges":\([0-9]*\).*/\1/p' /tmp/stats.json
}
tries=0
until [ "$(pmu_charges)" -gt 0 ] 2>/dev/null || [ "$tries" -ge 120 ]; do
	sleep 0.5
	tries=$((tries + 1))
done
echo "check pmu_charges=$(pmu_charges)"
# Until a compute task shows a wait p99 (they start slowly under TCG).
tries=0
until scx_sky top --snapshot >/tmp/top.txt 2>&1 &&
	grep -Eq 'cpu-idiv +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/top.txt || [ "$tries" -ge 60 ]; do
	sleep 0.5
	tries=$((tries + 1))
done
if grep -Eq 'cpu-idiv +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/top.txt; then
	echo "check top_p99=1"
else
	sed 's/^/top: /' /tmp/top.txt
fi
# A member process (`pvas run` starts it as its child).
member=$(pidof mb-a | cut -d' ' -f1)
tries=0
until sky_query gangs --pid "$member" | grep -q '(space svc (uid 0): processes [0-9]*,[0-9]*,' || [ "$tries" -ge 120 ]; do
	sleep 0.5
	tries=$((tries + 1))
done
sky_query gangs --pid "$member" | sed 's/^/gangs: /'
sky_query gangs --pid "$member" | grep -q '(space svc (uid 0): processes [0-9]*,[0-9]*,' &&
	echo "check space_gang=1"
# The load has served its checks: the rest (reload, the bus, restarts)
# needs none, and each BPF load under it takes ~25 s. `pvas run` waits
# for its member: stop the members themselves.
kill $load 2>/dev/null
killall mb-a 2>/dev/null
wait

# Reload: the edited site policy, live (sched_ext stays enabled).
before=$(policy_generation)
sed -i 's/^starve_ms = .*/starve_ms = 40/' /etc/scx_sky/policies/site.toml
systemctl reload scx_sky
echo "check reload_exit=$?"
echo "check reload_waited_halfs=$(wait_generation_past "$before")"
echo "check reload_starve_ms=$(scx_sky policy get | sed -n 's/^starve_ms = //p')"
echo "check reload_same_pid=$([ "$(systemctl show -p MainPID --value scx_sky)" = "$pid" ] && echo 1)"

# Over the system bus as nobody: polkit decides.
su nobody -s /bin/sh -c 'scx_sky policy set vtime' >/tmp/bus-refused.out 2>&1
echo "check bus_refused_exit=$?"
cat /tmp/bus-refused.out
grep -q 'polkit does not allow uid 65534 .*org.scx.sky.set-policy' /tmp/bus-refused.out &&
	echo "check bus_refused_by_polkit=1"
cat >/etc/polkit-1/rules.d/50-sky-test.rules <<'EOF'
polkit.addRule(function(action, subject) {
	if (action.id == "org.scx.sky.set-policy" && subject.user == "nobody")
		return polkit.Result.YES;
});
EOF
# polkitd reloads its rules when the directory changes.
tries=0
until su nobody -s /bin/sh -c 'scx_sky policy set vtime' >/tmp/bus-allowed.out 2>&1 || [ "$tries" -ge 60 ]; do
	sleep 0.5
	tries=$((tries + 1))
done
echo "check bus_allowed_tries=$tries"
cat /tmp/bus-allowed.out
echo "check bus_allowed_policy=$(policy_name)"
su nobody -s /bin/sh -c 'scx_sky policy get' | head -1 | sed 's/^/nobody get: /'

# The journal: start-up lines, and no line a period.
journalctl --no-pager -o cat -u scx_sky >/tmp/journal.txt
sed 's/^/journal: /' /tmp/journal.txt
echo "check journal_lines=$(wc -l </tmp/journal.txt)"

# Restart=on-failure: a killed scheduler comes back.
kill -KILL "$pid"
tries=0
while { [ "$(systemctl show -p MainPID --value scx_sky)" = "$pid" ] ||
	[ "$(systemctl show -p MainPID --value scx_sky)" = 0 ] ||
	[ "$(state)" != enabled ]; } && [ "$tries" -lt 1200 ]; do
	sleep 0.1
	tries=$((tries + 1))
done
echo "check restarted=$([ "$(state)" = enabled ] && [ "$(systemctl show -p MainPID --value scx_sky)" != 0 ] && echo 1)"
echo "check restarts=$(systemctl show -p NRestarts --value scx_sky)"

systemctl stop scx_sky
echo "check stop_exit=$?"
wait_state disabled
echo "check stopped_state=$(state)"
echo "check active=$(systemctl is-active scx_sky)"
echo "check result=$(systemctl show -p Result --value scx_sky)"
echo "check runtime_dir_gone=$([ -e /run/scx_sky ] || echo 1)"

# A unit that adds RestrictSUIDSGID=yes (its seccomp filter refuses
# openat2): the scheduler runs and says once why spaces are not gangs.
mkdir -p /etc/systemd/system/scx_sky.service.d
printf '[Service]\nRestrictSUIDSGID=yes\n' >/etc/systemd/system/scx_sky.service.d/suid.conf
systemctl daemon-reload
since=$(date '+%Y-%m-%d %H:%M:%S')
systemctl start scx_sky
wait_state enabled
tries=0
until journalctl --no-pager -o cat -u scx_sky --since "$since" | grep -q 'openat2 is refused' ||
	[ "$tries" -ge 120 ]; do
	sleep 0.5
	tries=$((tries + 1))
done
echo "check seccomp_told=$(journalctl --no-pager -o cat -u scx_sky --since "$since" | grep -c 'openat2 is refused')"
systemctl stop scx_sky
wait_state disabled
rm -r /etc/systemd/system/scx_sky.service.d
scx_sky pvas destroy svc >/dev/null 2>&1
report_dmesg
