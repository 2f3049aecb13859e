# Who steers the root daemon through shared spaces (the README's trust
# model). alice and bob, two unprivileged users, each run a space named
# job (each in a directory of their own) whose two members are
# memory-bound by name (mb-job): the daemon makes two gangs, one per
# owner, never one. Meanwhile alice's members 3 and 4 label their slots
# with root's compute task and bob's (sky-work relabel: the victim's pid
# and start time, and memory-bound): root's `pvas ls` shows both labels as
# not proven, and neither victim is in any gang.
. ./lib.sh
mkdir -p /etc
grep -q '^alice:' /etc/passwd 2>/dev/null ||
	printf '%s\n' 'alice:x:1000:1000::/tmp:/bin/sh' 'bob:x:1001:1001::/tmp:/bin/sh' >>/etc/passwd
grep -q '^alice:' /etc/group 2>/dev/null || printf '%s\n' 'alice:x:1000:' 'bob:x:1001:' >>/etc/group
as_user() {
	user=$1
	shift
	su "$user" -s /bin/sh -c "$*"
}
named_work /tmp/trust mb-job cpu-victim
chmod 755 /tmp/trust
start_sky --stats-interval 1 --class 'mb-*=memory-bound' || exit 1

# Every process below lives until the checks are done (killed then):
# under TCG a process takes seconds to start, and the daemon's looks
# seconds each under this load.
/tmp/trust/cpu-victim compute --kind idiv --seconds 900 >/dev/null &
root_victim=$!
as_user bob 'echo $$ >/tmp/bob-victim.pid; exec /tmp/trust/cpu-victim compute --kind idiv --seconds 900 >/dev/null' &
tries=0
until [ -s /tmp/bob-victim.pid ] || [ "$tries" -ge 1200 ]; do
	sleep 0.1
	tries=$((tries + 1))
done
bob_victim=$(cat /tmp/bob-victim.pid)
for u in alice bob; do
	mkdir -p "/tmp/$u-spaces"
	chown "$u" "/tmp/$u-spaces"
	as_user "$u" "scx_sky pvas create job --dir /tmp/$u-spaces --members 4 --segment-mb 2" >"/tmp/$u-create.txt" 2>&1
	echo "check create_exit_$u=$?"
	sed "s/^/create $u: /" "/tmp/$u-create.txt"
	for id in 1 2; do
		as_user "$u" "scx_sky pvas run job --dir /tmp/$u-spaces --id $id -- /tmp/trust/mb-job gang --threads 2 --mb 4 --seconds 900" >"/tmp/$u-$id.txt" 2>&1 &
	done
done
space=$(sed -n 's/: .*//p' /tmp/alice-create.txt)
as_user alice "sky-work relabel $space --id 3 --victim $root_victim --seconds 900" >/tmp/relabel-root.txt 2>&1 &
relabel_root=$!
as_user alice "sky-work relabel $space --id 4 --victim $bob_victim --seconds 900" >/tmp/relabel-bob.txt 2>&1 &
relabel_bob=$!
# Until both forged labels are listed and both spaces ganged (a process
# starts slowly under TCG, and a look takes seconds under this load), at
# most 120 s of uptime: only a guard against a hang. The looks wait for
# the very lines the checks below count: any two unproven labels were not
# enough (a CI run stopped looking with root's label not yet listed).
uptime_s() { cut -d. -f1 /proc/uptime; }
deadline=$(($(uptime_s) + 120))
settled=no
while [ "$(uptime_s)" -lt "$deadline" ]; do
	sleep 0.5
	scx_sky pvas ls >/tmp/ls.txt 2>&1
	sky_query gangs >/tmp/gangs.txt
	root_label=$(grep -c "pid *$root_victim (pid not proven" /tmp/ls.txt)
	bob_label=$(grep -c "pid *$bob_victim (pid not proven" /tmp/ls.txt)
	space_gangs=$(grep -c '^gang .*space job' /tmp/gangs.txt)
	# What each look saw, for a run that never settles.
	echo "poll $(cut -d' ' -f1 /proc/uptime)s root_label=$root_label bob_label=$bob_label space_gangs=$space_gangs unproven: $(grep 'not proven' /tmp/ls.txt | tr -s ' ' | tr '\n' ';')" >>/tmp/polls.txt
	if [ "$root_label" -ge 1 ] && [ "$bob_label" -ge 1 ] && [ "$space_gangs" -ge 2 ]; then
		settled=yes
		break
	fi
done
echo "check settled=$settled"
cat /tmp/polls.txt
sed 's/^/ls: /' /tmp/ls.txt
sed 's/^/gangs: /' /tmp/gangs.txt
# The last look's counts (of /tmp/ls.txt, shown above).
echo "check unproven_root=$root_label"
echo "check unproven_bob=$bob_label"
echo "check alice_gangs=$(grep -c '^gang .*space job (uid 1000)' /tmp/gangs.txt)"
echo "check bob_gangs=$(grep -c '^gang .*space job (uid 1001)' /tmp/gangs.txt)"
for v in "$root_victim" "$bob_victim"; do
	sky_query gangs --pid "$v" >"/tmp/gangs-$v.txt"
	sed 's/^/victim: /' "/tmp/gangs-$v.txt"
done
echo "check root_victim_ganged=$(grep -c 'in no gang' "/tmp/gangs-$root_victim.txt" | sed 's/^1$/no/')"
echo "check bob_victim_ganged=$(grep -c 'in no gang' "/tmp/gangs-$bob_victim.txt" | sed 's/^1$/no/')"
kill "$root_victim" "$bob_victim"
# The relabels say what they wrote as they leave (SIGTERM); the members
# just go.
killall -TERM sky-work
wait "$relabel_root" "$relabel_bob"
killall mb-job
cat /tmp/relabel-root.txt /tmp/relabel-bob.txt
for f in /tmp/alice-1.txt /tmp/alice-2.txt /tmp/bob-1.txt /tmp/bob-2.txt; do
	sed "s|^|$f: |" "$f"
done
echo "check state_after_trust=$(state)"
stop_sky
report_dmesg
