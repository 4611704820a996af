# zsh -f capture.zsh DIR LINE (DIR holds _opcost): the completions zsh offers at the end of LINE, one a line
# (after Valodim's zsh-capture-completion: an interactive zsh in a zpty, compadd wrapped to print)
zmodload zsh/zpty
zpty z zsh -f -i
local line init=$(mktemp)
cat > $init <<INIT
PROMPT=
fpath=(${(q)1} \$fpath)
autoload -U compinit
compinit -u -d $init.dump
bindkey '^M' undefined
bindkey '^J' undefined
bindkey '^I' complete-word
null-line () { echo -E - \$'\0' }
compprefuncs=( null-line )
comppostfuncs=( null-line exit )
zstyle ':completion:*' list-grouped false
zstyle ':completion:*' insert-tab false
compadd () {
  if [[ \${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "\$@"; return \$?; fi
  typeset -a __hits
  builtin compadd -A __hits "\$@"
  typeset -A apre hpre hsuf asuf
  zparseopts -E P:=apre p:=hpre S:=asuf s:=hsuf
  [[ -n \$__hits ]] || return
  local i
  for i in {1..\$#__hits}; do echo -E - "\$IPREFIX\$apre\$hpre\$__hits[\$i]\$hsuf\$asuf"; done
}
echo ok
INIT
zpty -w z "source $init"
repeat 20; do zpty -r z line; [[ $line == ok* ]] && break; done
zpty -w z "$2"$'\t'
integer tog=0
while zpty -r z; do :; done | while IFS= read -r line; do
  if [[ $line == *$'\0\r' ]]; then (( tog++ )) && break || continue; fi
  (( tog )) && echo -E - ${line%$'\r'}
done
rm -f $init $init.dump
